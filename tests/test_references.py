"""The reference rows beside cuBLAS (--refs cublaslt,triton; gemmlab/gpu/references.py), on a CPU: the option,
the rows' order and turns in the rounds (tests/handlers.py:FakeGpu), a missing package as a note and no row,
and that a reference's C is checked like any kernel's (a stand-in launch on numpy inputs)."""

import json
import sys

import numpy as np
import pytest

import gemmlab
from gemmlab.errors import GemmlabError
from gemmlab.gpu import references
from gemmlab.gpu.problem import Problem
from gemmlab.jobs import Options, run_jobs
from gemmlab.results import metrics
from gemmlab.results.model import Shape
from test_cli import invoke


def test_refs_are_parsed_in_the_rows_order_and_a_wrong_one_is_one_error():
    assert references.parse(None) == () and references.parse("") == ()
    assert references.parse("triton,CUBLASLT") == ("cuBLASLt", "Triton")
    assert references.parse(["Triton", "triton"]) == ("Triton",)
    with pytest.raises(GemmlabError, match=r"^no reference 'nosuch': --refs takes cublaslt, triton \(comma-separated\)$"):
        references.parse("cublaslt,nosuch")
    assert set(references.NAMES.values()) <= metrics.REFERENCES  # no speed-up over them, no progress step


def test_refs_nosuch_on_the_command_line_is_one_line():
    for cmd in (["compare", "--variants", "tiled"], ["run", "--variant", "tiled"], ["suite"]):
        r = invoke(*cmd, "--refs", "nosuch")
        assert r.exit_code == 1
        assert r.stderr.strip() == "error: no reference 'nosuch': --refs takes cublaslt, triton (comma-separated)"


def test_refs_are_gemm_s():
    with pytest.raises(GemmlabError, match=r"^--refs adds GEMM references beside cuBLAS; transpose has none$"):
        gemmlab.compare(problem="transpose", refs="triton", progress=False)


def test_references_take_turns_with_cublas_and_come_before_its_row(tmp_path, monkeypatch):
    log = tmp_path / "requests.txt"
    monkeypatch.setenv("FAKEGPU_LOG", str(log))
    v = gemmlab.catalog().get("tiled")
    seen = []
    doc, rows = run_jobs("compare", [(v, v.defaults())], Shape(64, 64, 64),
                         Options(seed=3, rounds=2, refs=("cuBLASLt", "Triton")), keep_going=True,
                         on_row=lambda d, r: seen.append(r["variant"]), handler="handlers:FakeGpu")
    assert log.read_text().split() == ["cuBLAS", "cuBLASLt", "Triton", "tiled", "tiled", "Triton", "cuBLASLt", "cuBLAS"]
    assert [r["variant"] for r in rows] == ["tiled", "cuBLASLt", "Triton", "cuBLAS"]
    assert seen == ["cuBLAS", "cuBLASLt", "Triton", "tiled"]
    tiled, lt, tr, cublas = rows
    assert lt["pct_cublas"] == 125.0 and tr["pct_cublas"] == pytest.approx(100 * 0.5 / 0.6)
    assert lt["rounds_ms"] == [0.4, 0.4] and lt["compile_ms"] == 1234.0 and "notes" not in doc


def test_a_missing_package_is_a_note_and_no_row(fake_gpu, monkeypatch):
    monkeypatch.setenv("FAKEGPU_MISSING", "Triton")
    r = invoke("compare", "--variants", "tiled", "--size", 64, "--refs", "triton,cublaslt", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["variant"] for x in doc["rows"]] == ["tiled", "cuBLASLt", "cuBLAS"]
    assert doc["notes"] == ["no Triton row: the package behind Triton is not installed"]
    assert "note: no Triton row: the package behind Triton is not installed" in r.stderr
    assert doc["rows"][0]["speedup_first"] == 1.0  # the references are no rungs of the ladder
    rs = gemmlab.compare(["tiled"], shape=64, refs=["cublaslt"], progress=False, record=False)
    assert rs.reproduce.endswith(" --refs cublaslt") and [x["variant"] for x in rs.rows][-2:] == ["cuBLASLt", "cuBLAS"]


def test_runs_out_file_keeps_the_note(fake_gpu, monkeypatch, tmp_path):
    """A run's --out file holds the notes too (they come after its last row; at 06c2583 only stderr had them)."""
    monkeypatch.setenv("FAKEGPU_MISSING", "cuBLASLt")
    out = tmp_path / "run.json"
    r = invoke("run", "--variant", "tiled", "--size", 64, "--refs", "cublaslt", "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["notes"] == ["no cuBLASLt row: the package behind cuBLASLt is not installed"]
    assert [x["variant"] for x in doc["rows"]] == ["cuBLAS", "tiled"]


def test_a_suite_says_a_missing_reference_once(fake_gpu, monkeypatch):
    monkeypatch.setenv("FAKEGPU_MISSING", "cuBLASLt")
    r = invoke("suite", "--only", "256x256x256,256x256x1024", "--variants", "tiled", "--refs", "cublaslt,triton", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["variant"] for x in doc["rows"]] == ["tiled", "Triton", "cuBLAS"] * 2
    assert doc["notes"] == ["no cuBLASLt row: the package behind cuBLASLt is not installed"]
    assert r.stderr.count("note: no cuBLASLt row") == 1
    assert [s["variant"] for s in doc["summary"]] == ["tiled", "Triton"]  # Triton's x cuBLAS over the shapes


def test_missing_packages_skip_with_why(monkeypatch):
    problem = type("P", (), {"dtype": "bf16"})()
    monkeypatch.setitem(sys.modules, "nvmath", None)  # import nvmath raises ImportError
    monkeypatch.setitem(sys.modules, "torch", None)
    assert references.cublaslt(problem) == references.Skipped(
        "cuBLASLt", "nvmath-python is not installed (pip install nvmath-python, or gemmlab[refs])")
    assert references.triton(problem) == references.Skipped(
        "Triton", "torch with CUDA is not installed (Triton's matmul comes through torch.compile)")
    problem.dtype = "e4m3"
    assert references.cublaslt(problem).why == references.cublaslt(type("P", (), {"dtype": "bf16"})()).why
    assert references.triton(problem).why.startswith("no Triton row for FP8 inputs (torch.mm takes no float8 operands")


def _fake_nvmath(monkeypatch):
    """An importable nvmath-python that must not be reached (the row is refused before it is used)."""
    import types
    nvmath = types.ModuleType("nvmath")
    nvmath.linalg = types.ModuleType("nvmath.linalg")
    nvmath.linalg.advanced = types.ModuleType("nvmath.linalg.advanced")
    for name, module in (("nvmath", nvmath), ("nvmath.linalg", nvmath.linalg),
                         ("nvmath.linalg.advanced", nvmath.linalg.advanced)):
        monkeypatch.setitem(sys.modules, name, module)


def test_fp8_cublaslt_needs_torch(monkeypatch):
    _fake_nvmath(monkeypatch)
    monkeypatch.setitem(sys.modules, "torch", None)
    problem = type("P", (), {"dtype": "e5m2"})()
    assert references.cublaslt(problem) == references.Skipped(
        "cuBLASLt", "FP8 operands need torch (cupy has no float8 types for nvmath-python)")


class _Tensor:
    """What torch.from_dlpack gives, as far as _fp8_operands uses it: the array, the type it is viewed as,
    and the transpose."""
    def __init__(self, x, kind=None):
        self.x, self.kind = x, kind

    def view(self, kind):
        return _Tensor(self.x, kind)

    def t(self):
        return _Tensor(self.x.T, self.kind)


@pytest.mark.parametrize("dtype", ["e4m3", "e5m2"])
def test_fp8_cublaslt_operands_are_a_bt_as_column_major_b_and_the_tensor_scales(dtype):
    """nvmath's FP8 operands: A's codes, B^T's codes read as a K x N column-major B, both in torch's float8
    type of the run, and the per-tensor scales, which multiply to the reference (a stand-in torch)."""
    from gemmlab.results import fp8
    fake = type("T", (), {"float8_e4m3fn": "e4m3 type", "float8_e5m2": "e5m2 type",
                          "from_dlpack": staticmethod(lambda x: _Tensor(x))})
    problem = Problem(Shape(40, 24, 72), seed=2, dtype=dtype, xp=np)
    ops = references._fp8_operands(fake, problem)(problem.main)
    a, b, scales = ops["a"], ops["b"], ops["quantization_scales"]
    assert (a.kind, b.kind) == (f"{dtype} type", f"{dtype} type") and scales["a"].kind is None
    assert a.x.shape == (40, 72) and b.x.shape == (72, 24) and b.x.flags.f_contiguous  # column-major B
    assert scales["a"].x.shape == scales["b"].x.shape == (1,)
    got = (fp8.decode(np, a.x, dtype) * scales["a"].x[0]) @ (fp8.decode(np, b.x, dtype) * scales["b"].x[0])
    np.testing.assert_allclose(got, problem.main.ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(GemmlabError, match=r"^cuBLASLt's row takes per-tensor FP8 scales, not row$"):
        references._fp8_operands(fake, problem)(problem.timed_set("row"))


@pytest.mark.parametrize("wrong", [False, True])
def test_a_reference_row_is_checked_like_a_kernel(monkeypatch, wrong):
    problem = Problem(Shape(64, 48, 40), seed=1, xp=np)

    def stand_in(p, phase=None):  # C = A @ B, or with one element off
        def on(inputs):
            def launch():
                np.matmul(inputs.A, inputs.B, out=p.C)
                if wrong:
                    p.C[5, 7] += 1.0
            return launch
        return references.Ref(on, "a stand-in", 12.0)
    monkeypatch.setattr(references, "cublaslt", stand_in)
    timed = []
    monkeypatch.setattr(problem, "_timed", lambda r, launch, *a: timed.append(r.name))  # (bench needs a GPU)
    r = references.measure(problem, "cuBLASLt")
    assert (r.name, r.compile_ms, r.source) == ("cuBLASLt", 12.0, "a stand-in")
    if wrong:
        assert r.status == "FAIL" and (r.check.first["i"], r.check.first["j"]) == (5, 7) and timed == []
    else:
        assert r.status == "PASS" and timed == ["cuBLASLt"]


@pytest.mark.parametrize("c", ["fp32", "bf16"])
def test_the_ladder_page_shows_the_committed_reference_results(c):
    """docs/ladder.md's "Beside cuBLASLt and Triton": `gemmlab report --markdown` of each committed file."""
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    name = f"h100-refs-bf16-4096x4096x4096-{c}.json"
    doc = json.loads((root / "benchmarks" / name).read_text())
    assert all(r["status"] == "PASS" for r in doc["rows"]) and "cuBLASLt" in [r["variant"] for r in doc["rows"]]
    table = invoke("report", "--markdown", root / "benchmarks" / name).stdout.strip()
    assert table.startswith("| variant") and table in (root / "docs" / "ladder.md").read_text(), \
        f"paste `gemmlab report --markdown benchmarks/{name}` into docs/ladder.md"
