"""Suites of shapes (gemmlab/suites.py): the shipped files, suite files of one's own, shapes drawn at
random, the per-variant summary; and `auto` for every input type (results/tuning.py). CPU only; the
whole `suite` command runs through the stand-in GPU at the end."""

import json
import math

import pytest

import gemmlab
from gemmlab import problems, suites
from gemmlab.errors import GemmlabError
from gemmlab.results import tuning
from gemmlab.results.model import Shape
from conftest import ROOT
from test_cli import invoke


def test_the_llm_suite_is_llama3s_projections_at_prefill_and_decode():
    llm = suites.load("llm")
    assert llm.dtypes == ("bf16", "fp16") and len(llm.entries) == 8 * 6
    by = {(e.name, e.shape.M): e.shape for e in llm.entries}
    assert by[("8B qkv", 4096)] == Shape(4096, 6144, 4096)
    assert by[("8B gate/up", 128)] == Shape(128, 14336, 4096)
    assert by[("8B down", 1)] == Shape(1, 4096, 14336)
    assert by[("70B qkv", 16)] == Shape(16, 10240, 8192) and by[("70B down", 8192)] == Shape(8192, 8192, 28672)
    assert {e.shape.M for e in llm.entries} == {1, 16, 64, 128, 4096, 8192}


def test_a_suite_file_of_ones_own(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('dtypes = ["fp16"]\n[[shapes]]\nname = "x"\nM = [1, 2]\nN = 3\nK = [4, 5]\ntarget = 50\n')
    s = suites.load(str(f))
    assert [str(e.shape) for e in s.entries] == ["1x3x4", "1x3x5", "2x3x4", "2x3x5"]
    assert s.dtypes == ("fp16",) and {e.target for e in s.entries} == {50} and s.name == "mine"
    assert [str(e.shape) for e in s.only(["2x3x5"]).entries] == ["2x3x5"]
    with pytest.raises(GemmlabError, match="--only names shapes that are not in the suite; it has: 1x3x4, 1x3x5"):
        s.only(["9x9x9"])


@pytest.mark.parametrize("text, message", [
    ("[[shapes]]\nM = 1\nN = 2\n", "shape 1 needs M, N and K"),
    ("[[shapes]]\nM = 1\nN = 2\nK = 3\nbatch = 4\n", "shape 1 has unknown keys batch"),
    ("[[shapes]]\nM = 0\nN = 2\nK = 3\n", "shape 1: M must be a positive integer, not 0"),
    ("[[shapes]]\nM = 1\nN = 2\nK = 3\ntarget = 200\n", "shape 1's target is a percentage, not 200"),
    ('dtypes = ["fp8"]\n[[shapes]]\nM = 1\nN = 2\nK = 3\n', "dtypes is a list of fp32, tf32, fp16, bf16"),
    ("title = 'none'\n", "no \\[\\[shapes\\]\\]"),
    ("[[shapes]\n", "suite file .*mine.toml: "),
    # a suite file of another problem's sizes
    ('problem = "scan"\n[[shapes]]\nM = 2\nN = 3\n', "shape 1 has unknown keys M"),
    ('problem = "scan"\n[[shapes]]\nN = 3\ntarget = 50\n', "shape 1 has unknown keys target"),
    ('problem = "transpose"\n[[shapes]]\nN = 3\n', "shape 1 needs M and N"),
    ('problem = "scan"\ndtypes = ["bf16"]\n[[shapes]]\nN = 3\n', "dtypes are GEMM's; scan has inputs of its own"),
    ('problem = "sacn"\n[[shapes]]\nN = 3\n', "problem is one of gemm, copy, transpose, reduce, scan, histogram"),
])
def test_suite_file_mistakes_are_named(tmp_path, text, message):
    f = tmp_path / "mine.toml"
    f.write_text(text)
    with pytest.raises(GemmlabError, match=message):
        suites.load(str(f))


def test_an_unknown_suite_names_the_shipped_ones():
    with pytest.raises(GemmlabError, match="no suite 'nosuch': name one of lab, llm, or a TOML file of shapes"):
        suites.load("nosuch")


def test_random_shapes_are_log_uniform_reproducible_and_fit():
    a, b = suites.random_shapes(200, 7), suites.random_shapes(200, 7)
    assert a.entries == b.entries and a.entries != suites.random_shapes(200, 8).entries
    dims = [d for e in a.entries for d in (e.shape.M, e.shape.N, e.shape.K)]
    assert min(dims) >= 1 and max(dims) <= suites.RANDOM_MAX
    # log-uniform: about a third of the draws in each third of the log range (not most of them near 16384)
    thirds = [sum(1 for d in dims if lo <= math.log(d) / math.log(suites.RANDOM_MAX + 1) < hi)
              for lo, hi in ((0, 1 / 3), (1 / 3, 2 / 3), (2 / 3, 1.01))]
    assert all(150 <= t <= 250 for t in thirds), thirds
    small = suites.random_shapes(50, 7, "bf16", max_bytes=1 << 30)
    assert all(e.shape.bytes_needed(dtype="bf16") <= 1 << 30 for e in small.entries)
    with pytest.raises(GemmlabError, match="--random takes a positive number of shapes, not 0"):
        suites.random_shapes(0, 1)


def test_the_summary_is_the_geometric_mean_the_minimum_and_the_share_at_cublas():
    rows = [{"variant": "spread", "chosen_by": "auto", "x_cublas": 2.0}, {"variant": "cuBLAS", "x_cublas": 1.0},
            {"variant": "pipelined", "chosen_by": "auto", "x_cublas": 0.5}, {"variant": "cuBLAS", "x_cublas": 1.0},
            {"variant": "spread", "chosen_by": "auto", "x_cublas": None},
            {"variant": "tiled", "x_cublas": 1.0}]
    auto, tiled = suites.summary(rows)
    assert auto == {"variant": "auto", "shapes": 3, "failed": 1, "geomean": pytest.approx(1.0), "min": 0.5,
                    "at_or_above": pytest.approx(1 / 3)}
    assert tiled["variant"] == "tiled" and tiled["at_or_above"] == 1.0 and tiled["geomean"] == 1.0


def test_the_roofline_takes_the_input_types_bytes():
    s = Shape(1, 4096, 4096)
    assert suites.min_bytes(s, "bf16") == 2 * (4096 + 4096 * 4096) + 4 * 4096
    assert suites.roofline(s, 989e12, 3.3e12, "bf16")["ai"] == pytest.approx(s.flops / suites.min_bytes(s, "bf16"))


@pytest.mark.parametrize("shape, dtype, variant, params, why", [
    ((4096, 4096, 4096), "bf16", "wgmma_ws", {}, "warp-specialised"),
    ((64, 4096, 4096), "fp16", "wgmma_ws", {"BM": 64, "BN": 64, "STAGES": 10, "SPLIT_K": 2, "STAGED_STORE": False},
     "64 row(s) of C: warp-specialised wgmma, 64 x 64 tiles (64 of them, K in 2 slices), B streamed 10 stages deep"),
    ((65, 4096, 4096), "fp16", "wgmma_ws", {"BM": 64, "BN": 128, "STAGES": 8, "SPLIT_K": 2, "CLUSTER_M": 1},
     "65 row(s) of C: warp-specialised wgmma, 64 x 128 tiles (64 of them, K in 2 slices)"),
    ((128, 8192, 8192), "bf16", "wgmma", {"BM": 64, "BN": 128, "SPLIT_K": 2},
     "128 row(s) of C: 64 x 128 tiles (128 of them, K in 2 slices)"),
    ((17, 10240, 8192), "bf16", "wgmma", {"BM": 64, "BN": 128}, "64 x 128 tiles (80 of them)"),
    ((1, 10240, 8192), "bf16", "gemv", {"BM": 1, "SPLIT_K": 64}, "a stream of B, 10 tile(s) of 1 x 1024"),
    ((129, 4096, 4096), "bf16", "wgmma_ws", {}, "warp-specialised"),
    ((128, 14336, 4096), "bf16", "wgmma", {"BM": 64, "BN": 128}, "64 x 128 tiles (224 of them)"),
    ((128, 28672, 8192), "bf16", "wgmma_ws", {"BN": 128, "CLUSTER_M": 1}, "would make a second wave"),
    ((4096, 4096, 4100), "bf16", "wgmma_ws", {}, "K or N is not a multiple of 16 bytes: A or B copied"),
    ((4096, 4095, 4096), "fp16", "wgmma_ws", {}, "K or N is not a multiple of 16 bytes: A or B copied"),
    ((100, 4095, 4096), "fp16", "mma", {"BM": 128, "BN": 128, "WM": 32, "WN": 64, "SPLIT_K": 4},
     "K or N is not a multiple of 16 bytes: cp.async"),
    ((4096, 4096, 4096), "tf32", "wgmma_tf32", {}, "TMA and wgmma"),
    ((4096, 4096, 4098), "tf32", "mma", {}, "K or N is not a multiple of 16 bytes"),
])
def test_auto_for_the_tensor_core_types(shape, dtype, variant, params, why):
    v, got, how = tuning.choose(gemmlab.catalog(), "some GPU", Shape(*shape), 132, dtype)
    assert v.name == variant and how.startswith("rule") and why in how
    assert got.get("DTYPE", dtype) == dtype and all(got[k] == x for k, x in params.items())


def test_the_tuning_cache_keeps_each_input_type_apart():
    s = Shape(1024, 1024, 1024)
    tuning.save_best("H100", s, {"variant": "mma", "params": {"BM": 256, "DTYPE": "bf16"}, "ms": 1.0, "tflops": 1.0,
                                 "dtype": "bf16"})
    assert tuning.cached("H100", s, "bf16")[1] == "1024x1024x1024 bf16"
    assert tuning.cached("H100", s) is None and tuning.cached("H100", s, "fp16") is None
    v, params, how = tuning.choose(gemmlab.catalog(), "H100", s, 132, "bf16")
    assert v.name == "mma" and params["BM"] == 256 and how.startswith("tuning cache (1024x1024x1024 bf16")
    assert tuning.choose(gemmlab.catalog(), "H100", s)[0].name == "spread"  # FP32 still by the rule


def test_suite_random_runs_auto_in_every_type_and_sums_it_up(fake_gpu, tmp_path):
    # one run for the document (--out) and the table (a second run cost 2 s of CPU; --json is
    # test_suite_llm_and_its_mistakes')
    out = tmp_path / "random.json"
    table = invoke("suite", "--random", 3, "--seed", 11, "--dtype", "bf16", "--out", out)
    assert table.exit_code == 0, table.output
    doc = json.loads(out.read_text())
    drawn = [str(e.shape) for e in suites.random_shapes(3, 11, "bf16").entries]
    assert doc["seed"] == 11 and doc["dtype"] == "bf16" and doc["suite"]["name"] == "random"
    assert [x["shape"] for x in doc["rows"] if x["variant"] == "cuBLAS"] == drawn
    autos = [x for x in doc["rows"] if x.get("chosen_by") == "auto"]
    assert len(autos) == 3 and all(x["dtype"] == "bf16" for x in autos)
    (summary,) = doc["summary"]
    assert summary["variant"] == "auto" and summary["shapes"] == 3
    assert "geomean x cuBLAS" in table.stdout and "seed 11" in table.stdout


def test_suite_llm_and_its_mistakes(fake_gpu):
    r = invoke("suite", "--shapes", "llm", "--only", "16x4096x4096,1x4096x14336", "--dtype", "fp16", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {x["shape"] for x in doc["rows"]} == {"16x4096x4096", "1x4096x14336"} and doc["dtype"] == "fp16"
    assert {x["shape_name"] for x in doc["rows"]} == {"8B o", "8B down"}
    r = invoke("suite", "--random", 2, "--shapes", "llm")
    assert r.exit_code == 1 and "--random draws its own shapes; it does not take --shapes" in r.output
    r = invoke("suite", "--variants", "tiled", "--dtype", "bf16", "--only", "256x256x256")
    assert r.exit_code == 1 and "variant 'tiled' runs fp32, not bf16" in r.output


def test_report_shows_a_saved_suite_with_its_summary(fake_gpu, tmp_path):
    out = tmp_path / "s.json"
    assert invoke("suite", "--random", 2, "--seed", 3, "--out", out).exit_code == 0
    table = invoke("report", out)
    assert table.exit_code == 0 and "geomean x cuBLAS" in table.stdout and "suite random on Fake H100" in table.stdout
    md = invoke("report", "--markdown", out).stdout
    assert "| variant | shapes | failed | geomean x cuBLAS | min x cuBLAS | at or above 1.00x |" in md
    assert "| auto | 2 | 0 |" in md


def test_report_suites_sums_up_several_files_one_of_them_cut_short(fake_gpu, tmp_path):
    drawn, lab = tmp_path / "r.json", tmp_path / "lab.json"
    assert invoke("suite", "--random", 2, "--seed", 3, "--dtype", "bf16", "--out", drawn).exit_code == 0
    assert invoke("suite", "--only", "256x256x256,128x128x32768", "--out", lab).exit_code == 0
    doc = json.loads(lab.read_text())
    del doc["summary"]  # as a run stopped by a time limit leaves it: rows saved shape by shape, no summary
    doc["rows"] = doc["rows"][:2]
    lab.write_text(json.dumps(doc))
    md = invoke("report", "--suites", drawn, lab)
    assert md.exit_code == 0, md.output
    lines = md.stdout.splitlines()
    assert lines[0] == ("| suite | type | variant | shapes | failed | geomean x cuBLAS | min x cuBLAS "
                        "| at or above 1.00x |")
    assert lines[2].startswith("| random, seed 3 | bf16 | auto | 2 | 0 | ")
    assert lines[3].startswith("| lab | fp32 | auto | 1 | 0 | ") and len(lines) == 4
    wrong = invoke("report", "--suites", drawn, ROOT / "benchmarks/h100-compare-1024.json")
    assert wrong.exit_code == 1 and "--suites needs `gemmlab suite --json` files" in wrong.output

def test_run_auto_chooses_for_the_input_type_and_says_why(fake_gpu):
    r = invoke("run", "--variant", "auto", "--dtype", "bf16", "-M", 16, "-N", 4096, "-K", 4096, "--json")
    assert r.exit_code == 0, r.output
    kernel = json.loads(r.stdout)["rows"][0]
    assert kernel["variant"] == "wgmma_ws" and kernel["dtype"] == "bf16" and kernel["params"]["BM"] == 64
    assert "auto chose wgmma_ws DTYPE=bf16 BM=64 BN=128" in r.stderr and "16 row(s) of C" in r.stderr
    r = invoke("run", "--variant", "auto", "--dtype", "bf16", "-M", 3, "-N", 4096, "-K", 4096, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["rows"][0]["variant"] == "gemv"
    assert "auto chose gemv DTYPE=bf16 BM=4" in r.stderr and "3 row(s) of C: a stream of B" in r.stderr
    r = invoke("run", "--variant", "auto", "--dtype", "fp16", "-M", 100, "-N", 100, "-K", 100, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["rows"][0]["variant"] == "mma"


# ---------------------------------------------------------------------------- another problem's suite

def test_a_problems_suite_is_its_sizes_up_to_2_28_and_its_best_rung():
    reduce, transpose = suites.sizes("reduce"), suites.sizes("transpose")
    assert [reduce.label(e.shape) for e in reduce.entries] == [
        "1001", "65537", "1000003", "16789561", "134216951", "268435456"]
    assert reduce.problem == "reduce" and all((e.shape.M, e.shape.K) == (1, 1) for e in reduce.entries)
    assert [transpose.label(e.shape) for e in transpose.entries][::4] == ["37x129", "16384x16384"]
    assert [transpose.label(e.shape) for e in transpose.only(["4097x4095"]).entries] == ["4097x4095"]
    cat = gemmlab.catalog()
    for name, decl in problems.DECLARATIONS.items():  # the default rung is a rung of the problem's
        assert cat.get(decl.best).problem == name


def test_random_sizes_of_a_problem_are_log_uniform_to_2_28():
    a = suites.random_shapes(200, 7, problem="scan")
    assert a.entries == suites.random_shapes(200, 7, problem="scan").entries and a.problem == "scan"
    ns = [e.shape.N for e in a.entries]
    assert all(e.shape.M == e.shape.K == 1 for e in a.entries) and 1 <= min(ns) and max(ns) <= suites.RANDOM_MAX_N
    halves = sum(1 for n in ns if math.log(n) < math.log(suites.RANDOM_MAX_N) / 2)
    assert 70 <= halves <= 130, halves  # log-uniform: as many below 2^14 as above
    t = suites.random_shapes(50, 7, problem="transpose")
    assert all(e.shape.K == 1 and max(e.shape.M, e.shape.N) <= suites.RANDOM_MAX for e in t.entries)
    assert len({e.shape.M for e in t.entries}) > 10  # M drawn too, not the side of a square


def test_a_suite_file_of_a_problems_sizes(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('problem = "scan"\n[[shapes]]\nname = "odd"\nN = [7, 1000001]\n')
    s = suites.load(str(f))
    assert s.problem == "scan" and [s.label(e.shape) for e in s.entries] == ["7", "1000001"]
    assert {e.name for e in s.entries} == {"odd"} and all(e.shape.M == e.shape.K == 1 for e in s.entries)
    f.write_text('problem = "transpose"\n[[shapes]]\nM = 3\nN = [5, 6]\n')
    assert [str(e.shape) for e in suites.load(str(f)).entries] == ["3x5x1", "3x6x1"]


def test_suite_problem_runs_its_rung_beside_cupy_in_turns_and_sums_it_up(fake_gpu, tmp_path, monkeypatch):
    log = tmp_path / "requests.txt"
    monkeypatch.setenv("FAKEGPU_LOG", str(log))
    out = tmp_path / "transpose.json"
    table = invoke("suite", "--problem", "transpose", "--only", "37x129,1000x3001", "--variants",
                   "padded_tile,vec_tile", "--rounds", 2, "--seed", 4, "--out", out)
    assert table.exit_code == 0, table.output
    # each size in its own worker, the reference and the rungs taking turns, back the other way in round 2
    assert log.read_text().split() == ["cupy", "padded_tile", "vec_tile", "vec_tile", "padded_tile", "cupy"] * 2
    doc = json.loads(out.read_text())
    assert doc["problem"] == "transpose" and doc["suite"]["name"] == "transpose" and doc["seed"] == 4
    assert [(r["shape"], r["variant"]) for r in doc["rows"]] == [
        (size, v) for size in ("37x129", "1000x3001") for v in ("padded_tile", "vec_tile", "cupy")]
    assert [r["x_cublas"] for r in doc["rows"]] == [0.5, 0.5, 1.0] * 2  # the fake's cupy 0.5 ms over 1 ms
    assert [(s["variant"], s["shapes"], s["geomean"], s["min"]) for s in doc["summary"]] == [
        ("padded_tile", 2, 0.5, 0.5), ("vec_tile", 2, 0.5, 0.5)]
    assert "suite transpose on Fake H100" in table.stdout and "geomean x cupy" in table.stdout
    assert "1000x3001" in table.stdout and "TFLOP/s" not in table.stdout
    md = invoke("report", "--markdown", out).stdout
    assert "| 37x129 | vec_tile | TILES=2 | 1.000 |" in md and "| vec_tile | 2 | 0 | 0.500 | 0.500 | 0% |" in md


@pytest.mark.parametrize("args, message", [
    (["--problem", "reduce", "--dtype", "bf16"], "--dtype and --out-dtype choose GEMM's types; reduce has inputs"),
    (["--problem", "reduce", "--shapes", "llm"], "--shapes llm holds gemm shapes, not reduce's"),
    (["--problem", "reduce", "--variants", "auto"], "auto chooses GEMM kernels; name reduce variants (by default "
                                                    "its best, shfl)"),
    (["--variants", "shfl,prefetch"], "variant 'prefetch' computes scan, not reduce"),
    (["--problem", "transpose", "--plot", "t.png"], "--plot draws GEMM's roofline; a suite of another problem"),
    (["--problem", "histogram", "--inputs", "nosuch"], "histogram has no input set 'nosuch'"),
    (["--problem", "scan", "--only", "1000"], "--only names shapes that are not in the suite; it has: 1001, 65537"),
    (["--inputs", "skewed"], "--inputs chooses the input set of a problem other than gemm"),
])
def test_suite_problem_mistakes_are_one_line(args, message):
    r = invoke("suite", *args)
    assert r.exit_code == 1 and r.output.startswith("error: " + message), r.output
    assert len([line for line in r.output.splitlines() if line.startswith("error:")]) == 1
