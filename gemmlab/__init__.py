"""gemmlab: a runtime-compiled GEMM kernel playground.

The commands as functions (the CLI calls the same ones; each returns a ResultSet): run, compare,
sweep, suite, scaling, dist (several GPUs); and show, history. See docs/api.md. In a notebook, `%load_ext gemmlab` adds the
%gemmlab and %%gemmlab magics (gemmlab/notebook/, docs/notebook.md).

The pipeline, one module per stage: templates (find, validate) -> render (Jinja) -> compile (NVRTC,
cached) -> kernel (the configured kernel and its launch plan) -> gpu/ (inputs, the checked launch,
timing) -> results/ (the row model, the check, history) -> report (tables, JSON). Only gpu/ needs a GPU.
"""

__version__ = "0.1.0"

__all__ = ["GemmlabError", "Catalog", "Variant", "discover", "Rendered", "render", "Compiled",
           "compile_rendered", "Kernel", "LaunchPlan", "configure", "build", "catalog", "choose", "Problem", "Shape",
           "Result", "bench", "get_device", "DeviceInfo", "run", "compare", "sweep", "suite", "scaling", "dist",
           "show", "history", "ResultSet"]

from .errors import GemmlabError  # noqa: E402
from .templates import Catalog, Variant, discover  # noqa: E402
from .render import Rendered, render  # noqa: E402
from .compile import Compiled, compile_rendered  # noqa: E402
from .kernel import Kernel, LaunchPlan, configure  # noqa: E402
from .api import build, catalog, choose, compare, dist, history, run, scaling, show, suite, sweep  # noqa: E402


def load_ipython_extension(ipython):
    """`%load_ext gemmlab`: the magics of gemmlab/notebook/ (IPython is imported only then)."""
    from .notebook import load_ipython_extension as load
    load(ipython)


def __getattr__(name):  # the GPU side is imported on first use: `import gemmlab` stays fast and GPU-free
    if name in ("Shape", "Result"):
        from .results import model
        return getattr(model, name)
    if name == "Problem":
        from .gpu.problem import Problem
        return Problem
    if name == "ResultSet":
        from .present.resultset import ResultSet
        return ResultSet
    if name == "bench":
        from .gpu.bench import bench
        return bench
    if name in ("get_device", "DeviceInfo"):
        from .gpu import device
        return getattr(device, name)
    raise AttributeError(name)
