"""Shared fixtures. Every test gets a private compile cache and no user template directories, so
results never depend on the machine's ~/.cache or ~/.local/share."""

import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def gpu_available() -> bool:
    try:
        from gemmlab.device import cuda
        cuda()
        return True
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cubin-cache")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path, session_cache):
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(session_cache))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.delenv("GEMMLAB_KERNELS", raising=False)
    yield


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
