"""Work the tests will need, done ahead in the CPU time the run leaves idle.

On two cores the pytest-xdist workers leave one idle for about 25 s of a run: while a test waits for a
worker process to time out or hang (test_worker, test_isolated, test_jobs, test_dist_job), for a notebook's
kernel, or for a pytest inside a test. The controller, which only hands out tests, starts this module in a
process of the lowest priority the kernel has (SCHED_IDLE: it runs only on a core nothing else wants, so
it takes no time from the tests), and it compiles into the run's shared compile cache what the tests
will compile (each variant's defaults, test_compile's configurations), then
disassembles the defaults' cubins, whose SASS tests read, into the shared SASS cache (`sass`). The
tests that come to them later find them there, as they would after another test made them: the cache
entry is keyed by the source, the options and NVRTC, and holds ptxas's report. conftest orders the tests
so that those which wait run first and test_compile's configurations last. Whatever is not done when a
test needs it, the test does itself; the controller stops this process when the run ends.

GEMMLAB_TESTS_PREFETCH=0 turns it off."""

from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE = "GEMMLAB_TESTS_CUBIN_CACHE"  # the run's shared compile cache (conftest)


def sass(compiled) -> str:
    """gemmlab.compile.sass, once per cubin for the whole run: nvdisasm takes 0.6 s of CPU even for a small
    cubin, and test_compile and test_tensor read the SASS of some cubins in several tests. The text is kept
    beside the run's compile cache, so the pytest-xdist workers (and this module) share it too (the key
    names the source, the options and NVRTC: the cubin)."""
    from gemmlab.compile import sass as disassemble
    from gemmlab.files import write_atomic
    path = Path(os.environ[CACHE]).parent / "sass" / f"{compiled.key}.txt"
    if path.exists():
        return path.read_text()
    text = disassemble(compiled)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode())
    return text


def _idle() -> None:
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux
        os.nice(19)


def main() -> None:
    _idle()
    parent = os.getppid()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gemmlab.compile import compile_rendered
    from gemmlab.render import render
    from gemmlab.templates import discover
    from sampling import risk_sample

    ladder = discover().ladder()
    # First each variant's defaults in each input type, which many tests compile (test_properties'
    # first example, test_tensor, the CLI's and the API's); then the rest of test_compile's configurations
    # (the same list, the same calls); then the SASS of the defaults, which test_compile's and
    # test_tensor's SASS tests read.
    defaults = [(v, v.resolve(v.for_dtype(d))) for v in ladder for d in v.dtypes]
    jobs = [(v, p, "sm_90", False) for v, p in defaults]
    jobs += [(v, p, "sm_90", False) for v in ladder for p in risk_sample(v) if (v, p) not in defaults]
    jobs += [(v, p, "sm_90", True) for v, p in defaults]
    for v, params, arch, disassemble in jobs:
        if os.getppid() != parent:  # the run is over
            return
        try:
            compiled = compile_rendered(render(v, params), arch)
            if disassemble:
                sass(compiled)
        except Exception:  # the test that needs it will say what is wrong
            pass


if __name__ == "__main__":
    main()
