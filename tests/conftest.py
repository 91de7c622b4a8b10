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
import tempfile
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Everything gemmlab reads or writes outside the repository, by the variables that move it
# (templates.data_dir, compile's cache, history.path, tuning.path, templates.user_dirs; the compile
# cache's default under XDG_CACHE_HOME is not used once GEMMLAB_CACHE_DIR is set).
_SCRATCH = Path(tempfile.mkdtemp(prefix="gemmlab-tests-"))
os.environ["XDG_DATA_HOME"] = str(_SCRATCH / "xdg-data")
# One compile cache for the run: pytest-xdist's workers take the one their controller made (they start
# with its environment), so a kernel compiled by one worker is a cache hit in the others (writes to the
# cache are atomic renames). The controller's pytest_unconfigure removes it, after the workers end.
_SHARED_CACHE = "GEMMLAB_TESTS_CUBIN_CACHE"
if not (os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_SHARED_CACHE)):
    os.environ[_SHARED_CACHE] = str(_SCRATCH / "cubin-cache")
os.environ["GEMMLAB_CACHE_DIR"] = os.environ[_SHARED_CACHE]
for _var in ("GEMMLAB_KERNELS", "GEMMLAB_HISTORY", "GEMMLAB_TUNING", "GEMMLAB_GPU_JOBS"):
    os.environ.pop(_var, None)


def switched_on(value: str | None) -> bool:
    """An environment variable that is a switch: on unless unset, empty, 0, false or no."""
    return (value or "").strip().lower() not in ("", "0", "false", "no")


REQUIRE_GPU = switched_on(os.environ.get("GEMMLAB_REQUIRE_GPU"))


def pytest_unconfigure(config):
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


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with its driver (GEMMLAB_REQUIRE_GPU=1 fails instead of skipping)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def sass(compiled) -> str:
    """gemmlab.compile.sass, once per cubin for the whole run: nvdisasm takes 0.6 s of CPU to start, and
    test_compile and test_tensor read the SASS of some cubins in several tests. The text is kept beside
    the run's compile cache, so the pytest-xdist workers share it too (the key names the source, the
    options and NVRTC: the cubin)."""
    from gemmlab.compile import sass as disassemble
    from gemmlab.files import write_atomic
    path = Path(os.environ[_SHARED_CACHE]).parent / "sass" / f"{compiled.key}.txt"
    if path.exists():
        return path.read_text()
    text = disassemble(compiled)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode())
    return text


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
