"""Sweeps, the tuning cache, `auto`'s rule and the sweep plot, without a GPU."""

import json

import pytest

import gemmlab
from gemmlab import grid as sweep
from gemmlab.results import tuning
from gemmlab.errors import GemmlabError
from gemmlab.jobs import Options, run_jobs
from gemmlab.present.plots import sweep_plot
from gemmlab.render import render
from gemmlab.results.model import Shape
from conftest import GOOD_BODY, write_template


@pytest.mark.parametrize("spec,values", [("TILE=8,16, 32", ["8", "16", "32"]), ("REG=2..8", ["2", "3", "4", "5", "6", "7", "8"]),
                                         ("BK=8..32:8", ["8", "16", "24", "32"]), ("X=true", ["true"])])
def test_param_specs(spec, values):
    assert sweep.parse_spec(spec) == (spec.split("=")[0], values)


@pytest.mark.parametrize("spec,message", [
    ("TILE", "--param takes NAME=V1,V2 or NAME=A..B[:STEP], not 'TILE'"),
    ("TILE=", "--param TILE=: give a name and at least one value"),
    ("TILE= , ,", "--param TILE= , ,: give a name and at least one value"),
    ("=8", "--param =8: give a name and at least one value"),
    ("REG=8..2", "--param REG=8..2: a range goes up from A to B with a positive step"),
    ("REG=2..8:0", "--param REG=2..8:0: a range goes up from A to B with a positive step"),
])
def test_bad_param_specs(spec, message):
    with pytest.raises(GemmlabError) as e:
        sweep.parse_spec(spec)
    assert e.value.message == message


@pytest.mark.parametrize("spec,values", [("EPILOGUE=a=b, c", ["a=b", "c"]), ("REG=4..4", ["4"]), ("REG=-2..2:2", ["-2", "0", "2"]), ("REG=2..7:2", ["2", "4", "6"]),
                                         ("REG = 2 .. 3", ["2", "3"])])
def test_range_ends(spec, values):
    assert sweep.parse_spec(spec) == (spec.split("=")[0].strip(), values)  # the first = ends the name


def test_grid_keeps_the_fixed_values(user_dir):
    path = write_template(user_dir, "duo", GOOD_BODY)
    path.write_text(path.read_text().replace('idea = "a test template"\n', 'idea = "a test template"\ndtypes = ["fp32", "fp16"]\n'))
    v = gemmlab.catalog((user_dir,)).get("duo")
    valid, skipped = sweep.grid(v, ["TILE=8,16"], fixed={"DTYPE": "fp16"})
    assert valid == [{"DTYPE": "fp16", "TILE": 8}, {"DTYPE": "fp16", "TILE": 16}] and skipped == []
    valid, _ = sweep.grid(v, ["TILE=8,16"])
    assert [p["DTYPE"] for p in valid] == ["fp32", "fp32"]


def test_a_skipped_point_gives_its_one_reason(user_dir):
    write_template(user_dir, "few", GOOD_BODY)  # TILE: 8 or 16
    _, skipped = sweep.grid(gemmlab.catalog((user_dir,)).get("few"), ["TILE=8,32"])
    assert skipped == [({"TILE": "32"}, "TILE=32 is not allowed; choose one of: 8, 16")]  # not "cannot run with"


def test_grid_has_a_size_limit():
    v = gemmlab.catalog().get("regblock")
    with pytest.raises(GemmlabError, match="the grid has 10201 points") as e:
        sweep.grid(v, ["TILE=1..101", "REG=1..101"])
    assert e.value.message == "the grid has 10201 points; at most 10000" and e.value.hint == "sweep fewer values at once"
    assert len(sweep.grid(gemmlab.catalog().get("tiled"), ["TILE=1..10000"])[1]) == 10000 - 3  # 10000: allowed


def test_grid_skips_what_the_constraints_forbid_and_says_why():
    v = gemmlab.catalog().get("regblock")
    valid, skipped = sweep.grid(v, ["TILE=32,64,128", "REG=2..8:2"])
    assert len(valid) + len(skipped) == 12
    assert all(not v.violations(p) for p in valid)
    summary = sweep.skip_summary(skipped)
    assert sum(n for n, _, _ in summary) == len(skipped)
    assert summary[0] == (3, "REG=6 is not allowed; choose one of: 2, 4, 8", "TILE=32 REG=6")


def test_grid_rejects_an_unknown_parameter_and_folds_equal_points():
    v = gemmlab.catalog().get("tiled")
    with pytest.raises(GemmlabError, match="did you mean TILE"):
        sweep.grid(v, ["TILEE=8"])
    valid, _ = sweep.grid(v, ["TILE=8,08,0x8"])
    assert valid == [{"TILE": 8, "PREFETCH": True}]


def test_compile_all_in_parallel_reports_each_failure(user_dir):
    write_template(user_dir, "typo", GOOD_BODY.replace("acc += A[", "acc += AA["))
    cat = gemmlab.catalog((user_dir,))
    rendered = [render(cat.get("tiled"), {"TILE": 8}), render(cat.get("typo")), render(cat.get("tiled"), {"TILE": 16})]
    errors = sweep.compile_all(rendered, "sm_90", jobs=2)
    assert errors[0] is None and errors[2] is None and "does not compile" in errors[1]


def test_tuning_cache_keeps_the_best_and_finds_near_shapes():
    row = {"variant": "pipelined", "params": {"BM": 64}, "ms": 2.0, "tflops": 30.0}
    assert tuning.save_best("H100", Shape(1024, 1024, 1024), row) is None
    kept = tuning.save_best("H100", Shape(1024, 1024, 1024), dict(row, ms=3.0, params={"BM": 128}))  # slower: ignored
    assert kept["ms"] == row["ms"] and kept["params"] == row["params"]
    entry, at = tuning.cached("H100", Shape(1300, 1024, 800))
    assert at == "1024x1024x1024" and entry["params"] == {"BM": 64}
    assert tuning.cached("H100", Shape(2048, 1024, 1024)) is None  # 2x away in M: not near
    assert tuning.cached("A100", Shape(1024, 1024, 1024)) is None
    assert json.loads(tuning.path().read_text())["H100"]["1024x1024x1024"]["ms"] == 2.0


def test_shipped_winners_cover_the_suite_on_the_h100():
    from gemmlab import suites
    h100 = tuning.shipped()["NVIDIA H100 80GB HBM3"]
    cat = gemmlab.catalog()
    for e in suites.load("lab").entries[1:]:
        entry = h100[str(e.shape)]
        cat.get(entry["variant"]).resolve(entry["params"])  # still a valid configuration
    v, params, how = tuning.choose(cat, "NVIDIA H100 80GB HBM3", Shape(128, 128, 32768))
    assert v.name == "pipelined" and params["SPLIT_K"] == 128 and how.startswith("tuning cache")
    v, params, how = tuning.choose(cat, "NVIDIA H100 80GB HBM3", Shape(1, 3072, 3072))
    assert v.name == "skinny_narrow" and params["BM"] == 1 and how.startswith("tuning cache")


def test_auto_uses_the_cache_then_the_rule():
    cat = gemmlab.catalog()
    v, params, how = tuning.choose(cat, "H100", Shape(1024, 1024, 1024))
    assert how.startswith("rule") and v.name == "spread" and params["BM"] == 64
    tuning.save_best("H100", Shape(1024, 1024, 1024), {"variant": "regblock", "params": {"REG": 4}, "ms": 1.0, "tflops": 1.0})
    v, params, how = tuning.choose(cat, "H100", Shape(1024, 1024, 1024))
    assert v.name == "regblock" and params["REG"] == 4 and how.startswith("tuning cache")


@pytest.mark.parametrize("shape,variant,bm,reason", [
    ((4096, 4096, 4096), "spread", 128, "128 x 256 tiles fill 97% of the SMs' waves"),
    ((3072, 3072, 3072), "spread", 64, "64 x 128 tiles fill 97% of the SMs' waves (128 x 256: 73%)"),
    ((1024, 1024, 1024), "spread", 64, "64 x 128 tiles fill 97% of the SMs' waves (128 x 256: 24%)"),
    ((64, 3072, 3072), "pipelined", 64, "small or skinny C (48 tiles of 64 x 64): K split 16 ways, so that every SM gets work")])
def test_rule_fills_the_waves(shape, variant, bm, reason):
    name, overrides, why = tuning.rule(Shape(*shape), sms=132)
    params = gemmlab.catalog().get(name).resolve(overrides)
    assert name == variant and params["BM"] == bm and why == reason
    if shape[0] == 64:
        assert params["SPLIT_K"] == 16  # 48 tiles: 16 slices of 192 make 768 blocks, 4 an SM or more


def test_rule_gives_one_row_narrow_bands_where_there_are_enough():
    name, overrides, why = tuning.rule(Shape(1, 3072, 3072), sms=132)  # 96 bands of 32 columns
    assert name == "skinny_narrow" and gemmlab.catalog().get(name).resolve(overrides)["COLS"] == 32
    assert why == "one row of C: 96 bands of 32 columns, each over all of K (no split)"
    assert tuning.rule(Shape(1, 1024, 3072), sms=132)[0] == "skinny_async"  # 32 bands: too few, split K instead


@pytest.mark.parametrize("m,bm,split", [(2, 2, 32), (16, 16, 32), (32, 16, 16), (3, 4, 32)])
def test_rule_streams_b_for_a_few_rows(m, bm, split):
    name, overrides, why = tuning.rule(Shape(m, 3072, 3072), sms=132)
    params = gemmlab.catalog().get(name).resolve(overrides)  # a valid configuration
    assert name == "skinny_async" and params["BM"] == bm and params["SPLIT_K"] == split
    assert why == f"{m} row(s) of C: a stream of B, {3072 // 128 * (2 if m == 32 else 1)} block(s) of {bm} x 128, K in {split} slice(s)"
    assert tuning.rule(Shape(m, 3072, 64), sms=132)[1]["SPLIT_K"] == 2  # 2 x 2 warps' slices of 16 rows
    assert tuning.rule(Shape(m, 3072, 32), sms=132)[1]["SPLIT_K"] == 1  # none shorter (2 stages of 8 rows)


def test_wave_efficiency():
    assert tuning.wave_efficiency(288, 132) == pytest.approx(288 / 396)
    assert tuning.wave_efficiency(132, 132) == 1.0


def test_run_jobs_takes_a_function_of_the_device():
    v = gemmlab.catalog().get("tiled")
    seen = []

    def jobs(dev):
        seen.append(dev.name)
        return [(v, v.resolve({"TILE": 8}))]

    _, rows = run_jobs("sweep", jobs, Shape(32, 32, 32), Options(), handler="handlers:FakeGpu")
    assert seen == ["Fake H100"] and [r["variant"] for r in rows] == ["tiled", "cuBLAS"]


def _doc(swept, rows):
    return {"shape": {"M": 512, "N": 512, "K": 512}, "device": {"name": "H100"}, "date": "2026-11-23", "swept": swept,
            "rows": rows + [{"variant": "cuBLAS", "params": {}, "status": "PASS", "gflops": 30000.0}]}


@pytest.mark.parametrize("swept", [["TILE"], ["TILE", "REG"]])
def test_sweep_plot_is_a_png(tmp_path, swept):
    rows = [{"variant": "regblock", "params": {"TILE": t, "REG": r}, "status": "PASS", "gflops": 1000.0 * t / r}
            for t in (32, 64, 128) for r in (2, 4)]
    rows.append({"variant": "regblock", "params": {"TILE": 16, "REG": 2}, "status": "FAIL", "gflops": None})
    out = tmp_path / "sweep.png"
    sweep_plot(_doc(swept, rows), out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.png"]


def test_sweep_plot_needs_a_passing_row(tmp_path):
    with pytest.raises(GemmlabError, match="nothing to plot"):
        sweep_plot(_doc(["TILE"], []), tmp_path / "x.png")


def test_sweep_cli_errors(tmp_path):
    from test_cli import invoke
    r = invoke("sweep", "--variant", "regblock", "--param", "TILE=33")
    assert r.exit_code == 1 and "no point of the grid" in r.output and "skipped 1" in r.output
    (tmp_path / "p.png").write_text("mine")
    r = invoke("sweep", "--variant", "tiled", "--param", "TILE=8,16", "--plot", tmp_path / "p.png")
    assert r.exit_code == 1 and "already exists" in r.output
    r = invoke("run", "--variant", "auto", "--tile", "16")
    assert r.exit_code == 1 and "chooses the parameters" in r.output


def test_roofline_sides():
    from gemmlab.suites import roofline
    peak, bw = 66.9e12, 2.93e12  # ridge at 22.8 FLOP/B
    big = roofline(Shape(3072, 3072, 3072), peak, bw)
    assert big["bound"] == "compute" and big["bound_flops"] == peak and big["ai"] == pytest.approx(512)
    gemv = roofline(Shape(1, 3072, 3072), peak, bw)
    assert gemv["bound"] == "memory" and gemv["ai"] == pytest.approx(2 * 3072 * 3072 / (4 * (3072 + 3072 * 3072 + 3072)))
    assert gemv["bound_flops"] == pytest.approx(gemv["ai"] * bw)


def test_suite_has_the_labs_twelve_shapes_and_targets():
    from gemmlab import suites
    lab = suites.load("lab")
    shapes = [((e.shape.M, e.shape.N, e.shape.K), e.target) for e in lab.entries]
    assert len(shapes) == 12 and shapes[0] == ((3072, 3072, 3072), 40) and shapes[-1] == ((128, 128, 32768), 40)
    assert [t for s, t in shapes[1:8]] == [40, 35, 35, 40, 40, 40, 40]
    assert [s[0] for s, t in shapes[1:8]] == [512, 256, 128, 64, 32, 16, 1]
    assert dict(shapes)[(256, 256, 256)] is None and dict(shapes)[(256, 256, 8192)] == 25
    assert lab.dtypes == ("fp32",) and "lab" in suites.named() and "llm" in suites.named()


def _suite_doc():
    from gemmlab.suites import Entry, annotate
    rows = []
    for (m, n, k), target, tf, ctf in (((3072, 3072, 3072), 40, 38.0, 45.0), ((1, 3072, 3072), 40, 0.5, 0.66)):
        s = Shape(m, n, k)
        for name, t in (("splitk", tf), ("cuBLAS", ctf)):
            r = {"variant": name, "params": {}, "status": "PASS", "tflops": t, "ms": 1.0, "pct_peak": 100 * t / 66.9}
            rows.append(annotate(r, Entry(s, "", target), 66.9e12, 2.93e12, ctf))
    return {"device": {"name": "H100", "peak_fp32_tflops": 66.9}, "bandwidth_tbs": 2.93, "date": "2026-11-23",
            "commit": "x", "rows": rows}


def test_suite_rows_say_bound_and_target():
    doc = _suite_doc()
    big, big_cublas, gemv, _ = doc["rows"]
    assert big["pct_bound"] == pytest.approx(100 * 38 / 66.9) and big["met"] is True
    assert big["x_cublas"] == pytest.approx(38 / 45) and big_cublas["met"] is None
    assert gemv["bound"] == "memory" and gemv["pct_bound"] == pytest.approx(100 * 0.5e12 / (gemv["ai"] * 2.93e12))
    from gemmlab.present import lab_tables, markdown
    md = markdown.suite_markdown(doc)
    assert "| 3072x3072x3072 | splitk | 38.00 |" in md and "40% met" in md
    assert lab_tables.suite_table(doc).row_count == 4


def test_roofline_plot_is_a_png(tmp_path):
    from gemmlab.present.plots import roofline_plot
    out = tmp_path / "roof.png"
    roofline_plot(_suite_doc(), out)
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 10_000


def test_the_api_chooses_like_auto():
    v, params, why = gemmlab.choose(64, 3072, 3072, device="NVIDIA H100 80GB HBM3", sms=132)
    assert v.name == "spread" and params["SPLIT_K"] == 16 and why.startswith("tuning cache")
    v, params, why = gemmlab.choose(4096, 4096, 4096, device="some other GPU", sms=132)
    assert v.name == "spread" and params == v.defaults() and why.startswith("rule")


def _recorded(name):
    from conftest import ROOT
    return json.loads((ROOT / "benchmarks" / name).read_text())


@pytest.mark.parametrize("name,plot", [("h100-suite.json", "roofline_plot"), ("h100-scaling.json", "scaling_plot"),
                                       ("h100-sweep-split/pipelined-64x3072x3072.json", "sweep_plot")])
def test_plots_from_recorded_h100_results(tmp_path, name, plot):
    import gemmlab.present.plots as plots
    out = tmp_path / "p.png"
    getattr(plots, plot)(_recorded(name), out)
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 20_000


def test_a_shape_2x_away_takes_the_rule_not_a_neighbours_winner():
    v, params, why = gemmlab.choose(512, 512, 512, device="NVIDIA H100 80GB HBM3", sms=132)
    # the rule (64 x 128 tiles in 4 slices then: 12.7 TFLOP/s, the neighbour's winner 7.8); now 64 x 64 in 16
    assert why.startswith("rule") and v.name == "pipelined" and params["SPLIT_K"] == 16 and params["BN"] == 64
