"""The commands that need a GPU, run through their whole flow on a CPU: the CLI as a user calls it, a real
worker process, and tests/handlers.py:FakeGpu where GpuJobs would measure (the `fake_gpu` fixture).
What is tested is the orchestration: rows, speed-ups, faults, history reuse, sorting, --save-best,
the input type, the suite's columns."""

import json

import pytest

from conftest import GOOD_BODY, write_template
from test_cli import invoke

FLOPS_64 = 2 * 64**3


def template(directory, name, dtypes=None, choices="[8, 16]"):
    path = write_template(directory, name, GOOD_BODY)
    text = path.read_text().replace("choices = [8, 16]", f"choices = {choices}")
    if dtypes:
        text = text.replace('idea = "a test template"\n', f'idea = "a test template"\ndtypes = {json.dumps(dtypes)}\n')
    path.write_text(text)
    return path


def requests(log):
    return log.read_text().split() if log.exists() else []


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = tmp_path / "requests.txt"
    monkeypatch.setenv("FAKEGPU_LOG", str(path))
    return path


def test_run_checks_and_times_a_variant_beside_cublas_and_records_it(fake_gpu, log):
    r = invoke("run", "--variant", "tiled", "-p", "TILE=16", "--size", 64, "--seed", 5, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["command"] == "run" and doc["device"]["name"] == "Fake H100" and doc["seed"] == 5
    assert doc["shape"] == {"M": 64, "N": 64, "K": 64} and doc["dtype"] == "fp32"
    tiled, cublas = doc["rows"]
    assert (tiled["variant"], tiled["params"], tiled["status"]) == ("tiled", {"TILE": 16, "PREFETCH": True}, "PASS")
    assert tiled["ms"] == 1.0 and tiled["tflops"] == pytest.approx(FLOPS_64 / 1e-3 / 1e12)
    assert tiled["pct_cublas"] == 50.0 and cublas["pct_cublas"] == 100.0 and cublas["ms"] == 0.5
    assert tiled["changed"] == "first run" and len(tiled["source_hash"]) == 16
    assert requests(log) == ["cuBLAS", "tiled"]
    history = json.loads(invoke("history", "--json").stdout)["rows"]
    assert [(h["variant"], h["status"], h["ms"]) for h in history] == [("cuBLAS", "PASS", 0.5), ("tiled", "PASS", 1.0)]
    table = invoke("run", "--variant", "tiled", "-p", "TILE=16", "--size", 64, "--no-cublas")
    assert table.exit_code == 0 and "Fake H100" in table.stdout and "PASS" in table.stdout
    assert requests(log) == ["cuBLAS", "tiled", "tiled"]  # --no-cublas: no cuBLAS request


def test_compare_gives_speedups_over_rungs_that_have_a_time(fake_gpu, user_dir, tmp_path, log):
    for name in ("slow", "oob"):
        template(user_dir, name)
    out = tmp_path / "results.json"
    r = invoke("compare", "--variants", "naive,slow,oob,tiled", "--kernels-dir", user_dir, "--size", 64, "--json",
               "--out", out)
    assert r.exit_code == 1, r.output  # a row failed
    rows = json.loads(r.stdout)["rows"]
    assert [(x["variant"], x["status"]) for x in rows] == \
        [("naive", "PASS"), ("slow", "PASS"), ("oob", "CRASHED"), ("tiled", "PASS"), ("cuBLAS", "PASS")]
    assert [x["speedup_prev"] for x in rows[:4]] == [None, 0.5, None, 2.0]  # tiled over slow: oob has no time
    assert [x["speedup_first"] for x in rows[:4]] == [1.0, 0.5, None, 1.0]
    assert "CRASHED oob BLOCK=32" not in r.stderr and "CRASHED oob TILE=16: the kernel failed: illegal address; " \
        "its time is not reported" in r.stderr
    assert json.loads(out.read_text())["rows"] == rows  # the --out file has the speed-ups too
    assert requests(log) == ["cuBLAS", "naive", "slow", "oob", "tiled"]


def test_compare_runs_the_input_type_asked_for(fake_gpu, user_dir):
    template(user_dir, "duo", dtypes=["fp32", "fp16"])
    r = invoke("compare", "--variants", "duo", "--kernels-dir", user_dir, "--size", 64, "--dtype", "fp16", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["dtype"] == "fp16" and [(x["params"].get("DTYPE"), x["status"]) for x in doc["rows"]] == \
        [("fp16", "PASS"), (None, "PASS")]
    r = invoke("compare", "--variants", "duo", "--kernels-dir", user_dir, "--size", 64, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["rows"][0]["params"]["DTYPE"] == "fp32"  # its first type
    r = invoke("compare", "--variants", "duo,tiled", "--kernels-dir", user_dir, "--size", 64, "--dtype", "fp16")
    assert r.exit_code == 1 and "variant 'tiled' runs fp32, not fp16" in r.output


def test_sweep_sorts_reuses_the_history_and_saves_the_best(fake_gpu, user_dir, log):
    template(user_dir, "swept", choices="[8, 16, 32]")

    def sweep(*more):
        r = invoke("sweep", "--variant", "swept", "--kernels-dir", user_dir, "--param", "TILE=8,16,32,64",
                   "--size", 64, "--jobs", 1, "--json", *more)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout), r.stderr

    doc, err = sweep("--save-best")
    rows = doc["rows"]
    assert [(x["variant"], x["params"].get("TILE")) for x in rows] == [("swept", 32), ("swept", 16), ("swept", 8),
                                                                        ("cuBLAS", None)]  # fastest first
    assert [x["ms"] for x in rows] == [2.0, 4.0, 8.0, 0.5] and rows[0]["pct_cublas"] == 25.0
    assert doc["swept"] == ["TILE"] and doc["skipped"] == [
        {"params": {"TILE": "64"}, "why": "TILE=64 is not allowed; choose one of: 8, 16, 32"}]
    assert "skipped 1: TILE=64 is not allowed; choose one of: 8, 16, 32" in err
    assert "best swept TILE=32 saved for 64x64x64" in err
    from gemmlab.results import tuning
    saved = tuning.load()["Fake H100"]["64x64x64"]
    assert (saved["variant"], saved["params"], saved["ms"]) == ("swept", {"TILE": 32}, 2.0)
    assert requests(log) == ["cuBLAS", "swept", "swept", "swept"]

    again, err = sweep("--save-best")  # the history has all three: only cuBLAS is measured
    assert requests(log)[4:] == ["cuBLAS"]
    assert [(x["params"].get("TILE"), x["ms"]) for x in again["rows"]] == [(32, 2.0), (16, 4.0), (8, 8.0), (None, 0.5)]
    assert all(x["vs_last_text"].startswith("from history #") for x in again["rows"][:3])
    assert again["rows"][0]["pct_cublas"] == 25.0 and again["rows"][0]["tflops"] == pytest.approx(FLOPS_64 / 2e-3 / 1e12)
    assert "not saved: the tuning cache's swept TILE=32 (2.0000 ms) is faster than 2.0000 ms" in err

    fresh, _ = sweep("--fresh")
    assert requests(log)[5:] == ["cuBLAS", "swept", "swept", "swept"]
    assert not any(x["vs_last_text"].startswith("from history") for x in fresh["rows"])


def test_sweep_runs_the_input_type_asked_for(fake_gpu, user_dir):
    template(user_dir, "duo", dtypes=["fp32", "fp16"])
    r = invoke("sweep", "--variant", "duo", "--kernels-dir", user_dir, "--param", "TILE=8,16", "--dtype", "fp16",
               "--size", 64, "--jobs", 1, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["dtype"] == "fp16"
    assert sorted((x["params"]["DTYPE"], x["params"]["TILE"], x["status"]) for x in doc["rows"][:-1]) == \
        [("fp16", 8, "PASS"), ("fp16", 16, "PASS")]
    r = invoke("sweep", "--variant", "duo", "--kernels-dir", user_dir, "--param", "DTYPE=fp16,fp32")
    assert r.exit_code == 1 and "a sweep runs one input type; choose it with --dtype" in r.output


def test_suite_adds_the_roofline_and_the_targets(fake_gpu):
    r = invoke("suite", "--only", "3072x3072x3072,256x256x256", "--variants", "tiled", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["command"] == "suite" and doc["bandwidth_tbs"] == 3.0 and "shape" not in doc
    rows = doc["rows"]
    assert [(x["shape"], x["variant"]) for x in rows] == [("3072x3072x3072", "tiled"), ("3072x3072x3072", "cuBLAS"),
                                                          ("256x256x256", "tiled"), ("256x256x256", "cuBLAS")]
    big, big_cublas, small, _ = rows
    peak = doc["device"]["peak_fp32_tflops"]
    assert big["tflops"] == pytest.approx(2 * 3072**3 / 1e-3 / 1e12) and big["bound"] == "compute"
    assert big["pct_bound"] == pytest.approx(100 * big["tflops"] / peak) and big["x_cublas"] == pytest.approx(0.5)
    assert big["target_pct"] == 40 and big["met"] is True and big_cublas["met"] is None
    assert small["target_pct"] is None and small["met"] is None
    r = invoke("suite", "--only", "1x1x1", "--variants", "tiled")
    assert r.exit_code == 1 and "--only names shapes that are not in the suite; it has: 3072x3072x3072" in r.output
