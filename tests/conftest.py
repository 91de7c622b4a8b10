"""Shared fixtures. Every test gets a private compile cache and no user template directories, so
results never depend on the machine's ~/.cache or ~/.local/share.

The isolation starts when this file is imported, before any test module is collected: test_compile,
test_render, test_emulated and others build their parameter lists from the catalog at collection time,
and a template of the user's (`gemmlab new mytiled --from tiled`) must not become a test case there.

GPU tests are skipped without a GPU. With GEMMLAB_REQUIRE_GPU=1 (the device runs set it) a missing GPU
or a cupy that cannot start ends the run as a failure, with the error that stopped it."""

import functools
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

from prefetch import CACHE as _SHARED_CACHE, sass  # noqa: F401 (sass: the tests' SASS, shared by the run)
from sampling import switched_on

ROOT = Path(__file__).resolve().parent.parent

# Everything gemmlab reads or writes outside the repository, by the variables that move it
# (templates.data_dir, compile's cache, history.path, tuning.path, templates.user_dirs; the compile
# cache's default under XDG_CACHE_HOME is not used once GEMMLAB_CACHE_DIR is set).
_SCRATCH = Path(tempfile.mkdtemp(prefix="gemmlab-tests-"))
os.environ["XDG_DATA_HOME"] = str(_SCRATCH / "xdg-data")
# One compile cache for the run: pytest-xdist's workers take the one their controller made (they start
# with its environment), so a kernel compiled by one worker is a cache hit in the others (writes to the
# cache are atomic renames). The controller's pytest_unconfigure removes it, after the workers end.
if not (os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_SHARED_CACHE)):
    os.environ[_SHARED_CACHE] = str(_SCRATCH / "cubin-cache")
os.environ["GEMMLAB_CACHE_DIR"] = os.environ[_SHARED_CACHE]
for _var in ("GEMMLAB_KERNELS", "GEMMLAB_HISTORY", "GEMMLAB_TUNING", "GEMMLAB_GPU_JOBS"):
    os.environ.pop(_var, None)
# Bytecode: a run starts about a hundred Python processes (the workers, the CLI and job workers of the
# tests, notebook kernels), each importing gemmlab. Where PYTHONDONTWRITEBYTECODE is set, every one of them
# would compile gemmlab's modules from source again (about 0.2 s of CPU each), so the processes the run
# starts write bytecode as Python does by default: gemmlab/__pycache__ and tests/__pycache__, which git
# ignores. (A PYTHONPYCACHEPREFIX would keep the checkout clean but also hide the installed packages'
# bytecode: each worker then compiled pytest, numpy and cupy from source, 4 s more of its collection.)
if not os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


REQUIRE_GPU = switched_on(os.environ.get("GEMMLAB_REQUIRE_GPU"))


def _start_prefetch(config) -> None:
    """The controller of a pytest-xdist run (which collects nothing and runs no test) starts
    tests/prefetch.py: compiles and disassemblies the tests will ask for, done in CPU time the workers
    leave idle."""
    if (config.pluginmanager.hasplugin("dsession") and switched_on(os.environ.get("GEMMLAB_TESTS_PREFETCH", "1"))
            and _runs_test_compile(config)):
        config._gemmlab_prefetch = subprocess.Popen([sys.executable, str(Path(__file__).parent / "prefetch.py")],
                                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.DEVNULL)


def _runs_test_compile(config) -> bool:
    """Whether the run takes in tests/test_compile.py (its directory, the file, or a test of it), and no
    -m or -k picks among the tests (the device runs' -m gpu, say)."""
    if config.option.markexpr or config.option.keyword:
        return False
    here = Path(__file__).parent / "test_compile.py"
    args = [a.split("::")[0] for a in config.args] or [str(config.rootpath / p) for p in config.getini("testpaths")]
    return any(here == p or p in here.parents for p in (Path(config.invocation_params.dir, a).resolve() for a in args))


def pytest_unconfigure(config):
    prefetch = getattr(config, "_gemmlab_prefetch", None)
    if prefetch is not None:
        prefetch.kill()
        prefetch.wait()
    shutil.rmtree(_SCRATCH, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def gpu_probe() -> str | None:
    """None when a CUDA GPU can be used, else why not: gemmlab's own "no CUDA GPU" message, with the
    exception behind it. Anything else (a bug in gemmlab.gpu.driver, say) is raised, not taken for a
    machine without a GPU: skipping every GPU test would hide it."""
    from gemmlab.gpu.driver import cuda
    from gemmlab.errors import GemmlabError
    try:
        cuda()
    except GemmlabError as e:
        cause = e.__cause__ or e.__context__  # cuda() raises `from None`: the cupy error is still here
        return e.message + ("\n" + "".join(traceback.format_exception(cause)) if cause else "")
    return None


def gpu_available() -> bool:
    return gpu_probe() is None


def pytest_sessionstart(session):
    if REQUIRE_GPU and (why := gpu_probe()) is not None:
        pytest.exit(f"GEMMLAB_REQUIRE_GPU is set, but there is no GPU to test on: {why}", returncode=1)
    _start_prefetch(session.config)


# The order a pytest-xdist run hands the tests out in, from the front of the list. First those that
# mostly wait, for a worker process to time out or hang, a notebook's kernel, a pytest or a pip inside the
# test, the longest first: the CPU time they leave idle goes to tests/prefetch.py early, and the run does
# not end on one of them with the other worker done. test_compile last, whose compiles and SASS prefetch
# does ahead. Everything else in between, in file order; the tests of a file keep their order. (In one
# process, -n 0 as tests/mutation.sh runs them, the order stays pytest's.)
FIRST = ("test_notebook.py", "test_worker.py", "test_dist_job.py", "test_templates.py::test_a_regular_install_ships_the_kernels",
         "test_suites.py", "test_jobs.py", "test_gpus.py", "test_isolated.py", "test_isolation.py")
LAST = ("test_compile.py",)


def _turn(item) -> tuple:
    test = item.nodeid.rsplit("/", 1)[-1]
    first = [i for i, name in enumerate(FIRST) if test == name or test.startswith(name + "::")]
    return (0, first[0]) if first else (2,) if test.split("::")[0] in LAST else (1,)


def pytest_collection_modifyitems(config, items):
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: they all sort alike, so they agree
        items.sort(key=_turn)
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with its driver (GEMMLAB_REQUIRE_GPU=1 fails instead of skipping)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def session_cache():
    """The compile cache every test shares (set above, at import): a configuration compiles once a run."""
    return Path(os.environ["GEMMLAB_CACHE_DIR"])


_DATA_DIRS = itertools.count()


@pytest.fixture(autouse=True)
def isolated(monkeypatch, session_cache):
    """Each test: its own data directory (templates of `gemmlab new`, history, tuning cache), a path in
    this process's scratch directory that nothing has made yet, as for a new user. Not under tmp_path:
    making one for each of the 2000 tests took 3 s of CPU, and most of them never write there."""
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(session_cache))
    monkeypatch.setenv("XDG_DATA_HOME", str(_SCRATCH / "data" / str(next(_DATA_DIRS)) / "xdg-data"))
    for var in ("GEMMLAB_KERNELS", "GEMMLAB_HISTORY", "GEMMLAB_TUNING", "GEMMLAB_GPU_JOBS"):
        monkeypatch.delenv(var, raising=False)
    # Tables are as wide as a pipe gets (200 columns) wherever the tests run: a pytest-xdist worker
    # inherits the terminal's COLUMNS, which would leave out columns a test looks for.
    monkeypatch.setenv("COLUMNS", "200")
    yield


@pytest.fixture
def fake_gpu(monkeypatch):
    """The CLI's GPU side replaced by tests/handlers.py:FakeGpu, in a real worker process: `run`,
    `compare`, `sweep` and `suite` go through their whole flow on a CPU."""
    from gemmlab.worker import GPU_JOBS_ENV
    monkeypatch.setenv(GPU_JOBS_ENV, "handlers:FakeGpu")
    monkeypatch.setenv("COLUMNS", "300")  # tables wide enough that no cell is cut


@pytest.fixture
def user_dir(tmp_path):
    d = tmp_path / "my-kernels"
    d.mkdir()
    return d


def write_template(directory: Path, name: str, body: str, header_extra: str = "", parent: str = "tiled") -> Path:
    """A minimal valid template around `body` (the kernel code)."""
    path = directory / f"{name}.cu.j2"
    path.write_text(
        "{#---\n"
        f'name = "{name}"\n'
        f'parent = "{parent}"\n'
        'idea = "a test template"\n'
        "[params.TILE]\n"
        "default = 16\n"
        "choices = [8, 16]\n"
        f"{header_extra}"
        "[launch]\n"
        'block = ["TILE", "TILE"]\n'
        'grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]\n'
        "---#}\n" + body)
    return path


# A template that starts from tiled (`from`) and replaces one block: its inner loop, kept rolled.
ROLLED = """{#---
name = "rolled"
from = "tiled"
idea = "tiled, its inner loop kept rolled"
---#}
{% block compute %}
        #pragma unroll 1
        for (int k = 0; k < {{ TILE }}; ++k)
            acc += As[ty][k] * Bs[k][tx];
{% endblock %}
"""


GOOD_BODY = """extern "C" __global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int col = blockIdx.x * {{ TILE }} + threadIdx.x;
    const int row = blockIdx.y * {{ TILE }} + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
"""
