"""Execute a notebook top to bottom in a Jupyter kernel of this Python, and write the executed copy.

    python3 benchmarks/run_notebook.py examples/tour.ipynb OUT.ipynb [--timeout SECONDS]

The kernel is this interpreter's (sys.executable -m ipykernel_launcher, whatever kernels are installed),
started in the notebook's folder with this environment (PYTHONPATH too), and each cell may take up to
--timeout seconds. A cell that raises stops the run with exit status 1; the copy is written all the same,
with its outputs so far. Needs gemmlab[notebook] (ipykernel, nbclient, nbformat). tests/test_notebook.py
runs examples/tour.ipynb this way on every test run (its GPU cells say they need a GPU, on a machine
without one); on an H100 this makes the tour's executed copy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def kernel_manager():
    """A KernelManager of this interpreter's kernel: not a `python3` kernelspec installed for another one."""
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    class ThisPython(KernelManager):
        @property
        def kernel_spec(self):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="Python 3", language="python")
    return ThisPython()


def execute(path: str | Path, out: str | Path | None = None, timeout: int = 600):
    """The notebook at `path`, executed (nbformat's NotebookNode), and written to `out` if given."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, km=kernel_manager(), timeout=timeout,
                            resources={"metadata": {"path": str(path.resolve().parent)}})
    try:
        client.execute()
    finally:
        if out:
            nbformat.write(nb, out)
    return nb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("out", help="where the executed copy goes")
    ap.add_argument("--timeout", type=int, default=600, help="seconds a cell may take (default 600)")
    args = ap.parse_args()
    from nbclient.exceptions import CellExecutionError
    try:
        execute(args.notebook, args.out, args.timeout)
    except CellExecutionError as e:
        print(f"run_notebook: a cell failed; the copy so far is in {args.out}\n{e}", file=sys.stderr)
        return 1
    print(f"run_notebook: executed {args.notebook} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
