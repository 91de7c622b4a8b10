"""The test run itself: it never sees the user's templates, history or caches, at collection either,
and with GEMMLAB_REQUIRE_GPU a GPU run cannot pass by skipping. Subprocesses of pytest, no GPU."""

import os
import subprocess
import sys
import textwrap

import pytest

import conftest
from conftest import GOOD_BODY, ROOT, write_template

# A plugin for the inner pytest: what the environment is once collection is over.
PROBE = textwrap.dedent("""
    import os

    def pytest_collection_finish(session):
        for var in ("XDG_DATA_HOME", "GEMMLAB_CACHE_DIR", "GEMMLAB_KERNELS", "GEMMLAB_HISTORY", "GEMMLAB_TUNING"):
            print(f"PROBE {var}={os.environ.get(var)}")
""")


def inner_pytest(tmp_path, args, **env):
    (tmp_path / "isolation_probe.py").write_text(PROBE)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GEMMLAB_", "XDG_", "PYTEST_"))}
    base["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    return subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-p", "isolation_probe", *args],
                          cwd=ROOT, capture_output=True, text=True, env=dict(base, **env), timeout=600)


def test_the_users_templates_history_and_caches_never_reach_the_tests(tmp_path):
    """The README's steps: `gemmlab new mytiled --from tiled`, then the test command. test_emulated and
    test_properties (like test_compile and test_render) list the variants when they are collected."""
    data = tmp_path / "user-data"
    (data / "gemmlab" / "kernels").mkdir(parents=True)
    write_template(data / "gemmlab" / "kernels", "mytiled", GOOD_BODY, parent="tiled")  # where `gemmlab new` writes
    env_dir = tmp_path / "env-kernels"
    env_dir.mkdir()
    write_template(env_dir, "envtiled", GOOD_BODY, parent="tiled")
    user = {"XDG_DATA_HOME": str(data), "GEMMLAB_KERNELS": str(env_dir), "GEMMLAB_CACHE_DIR": str(tmp_path / "user-cache"),
            "GEMMLAB_HISTORY": str(tmp_path / "user-history.sqlite"), "GEMMLAB_TUNING": str(tmp_path / "user-tuning.json")}
    p = inner_pytest(tmp_path, ["--collect-only", "-q", "tests/test_emulated.py", "tests/test_properties.py"], **user)
    assert p.returncode == 0, p.stdout + p.stderr
    ids = [line for line in p.stdout.splitlines() if "::" in line]
    assert any("[tiled]" in i for i in ids), p.stdout  # the built-in ones are there
    assert not [i for i in ids if "mytiled" in i or "envtiled" in i]
    seen = dict(line[len("PROBE "):].split("=", 1) for line in p.stdout.splitlines() if line.startswith("PROBE "))
    assert seen["GEMMLAB_KERNELS"] == seen["GEMMLAB_HISTORY"] == seen["GEMMLAB_TUNING"] == "None"
    assert not seen["XDG_DATA_HOME"].startswith(str(tmp_path)) and not seen["GEMMLAB_CACHE_DIR"].startswith(str(tmp_path))
    assert not (tmp_path / "user-cache").exists() and not (tmp_path / "user-history.sqlite").exists()


BROKEN_CUPY = "raise ImportError('libcudart.so.13: cannot open shared object file: No such file or directory')\n"


def test_require_gpu_fails_a_run_whose_cupy_is_broken(tmp_path):
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(BROKEN_CUPY)
    args = ["-q", "tests/test_worker.py::test_phases_reach_the_parent"]
    p = inner_pytest(tmp_path, args, GEMMLAB_REQUIRE_GPU="1")
    assert p.returncode == 1, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "GEMMLAB_REQUIRE_GPU is set, but there is no GPU to test on: no CUDA GPU is available" in out
    assert "libcudart.so.13: cannot open shared object file" in out  # the error behind it, as raised
    assert "passed" not in out
    # without the variable, the same machine skips the GPU tests and passes
    p = inner_pytest(tmp_path, args)
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr


def test_the_gpu_probe_says_why_and_hides_nothing_else(monkeypatch):
    import gemmlab.gpu.driver
    from gemmlab.errors import GemmlabError
    probe = conftest.gpu_probe.__wrapped__  # not the cached answer

    def no_gpu():
        try:
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        except RuntimeError:
            raise GemmlabError("no CUDA GPU is available: cudaErrorNoDevice") from None

    monkeypatch.setattr(gemmlab.gpu.driver, "cuda", no_gpu)
    why = probe()
    assert why.startswith("no CUDA GPU is available: cudaErrorNoDevice\n")
    assert "RuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected" in why

    def bug():
        raise AttributeError("module 'cupy' has no attribute 'cuda'")

    monkeypatch.setattr(gemmlab.gpu.driver, "cuda", bug)
    with pytest.raises(AttributeError, match="has no attribute 'cuda'"):  # a bug, not a machine without a GPU
        probe()
    monkeypatch.setattr(gemmlab.gpu.driver, "cuda", lambda: "cupy")
    assert probe() is None


@pytest.mark.parametrize("value,required", [("1", True), ("yes", True), (" Yes ", True), ("0", False), ("", False),
                                            (None, False), ("no", False), ("FALSE", False)])
def test_require_gpu_values(value, required):
    """How GEMMLAB_REQUIRE_GPU's value reads (conftest reads the variable itself when it is imported: the
    inner runs of test_require_gpu_fails_a_run_whose_cupy_is_broken, with it and without it)."""
    assert conftest.switched_on(value) is required


def test_a_gpu_test_skipped_without_a_gpu_says_what_it_needs(tmp_path):
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(BROKEN_CUPY)
    p = inner_pytest(tmp_path, ["-q", "-rs", "-m", "gpu", "tests/test_gpc.py"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "needs an NVIDIA GPU with its driver" in p.stdout and "device" not in p.stdout, p.stdout
