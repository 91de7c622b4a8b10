"""The job loop with a fake GPU worker (no GPU needed): rows come one by one, faults become rows, the
run goes on after them, and the order is the jobs' order with cuBLAS last."""

import pytest

import gemmlab
from gemmlab.jobs import Options, run_jobs
from gemmlab.results.model import Shape
from conftest import GOOD_BODY, write_template


def test_rows_come_as_they_are_made_and_faults_do_not_stop_the_run(user_dir):
    for name in ("oob", "hang", "slow"):
        write_template(user_dir, name, GOOD_BODY)
    cat = gemmlab.catalog((user_dir,))
    jobs = [(cat.get(n), cat.get(n).defaults()) for n in ("tiled", "oob", "hang", "slow")]
    seen, phases = [], []
    doc, rows = run_jobs("compare", jobs, Shape(64, 64, 64), Options(seed=7, timeout=2), keep_going=True,
                         on_phase=phases.append, on_row=lambda d, r: seen.append(r["variant"]),
                         handler="handlers:FakeGpu")
    assert seen == ["cuBLAS", "tiled", "oob", "hang", "slow"]  # each handed on when measured
    assert [r["variant"] for r in rows] == ["tiled", "oob", "hang", "slow", "cuBLAS"]
    assert [r["status"] for r in rows] == ["PASS", "CRASHED", "TIMEOUT", "PASS", "PASS"]
    tiled, oob, hang, slow, cublas = rows
    assert oob["ms"] is None and "illegal address" in oob["error"]
    assert hang["ms"] is None and "no progress for 2 s" in hang["error"]
    assert slow["ms"] == 2.0 and slow["pct_cublas"] == 25.0 and tiled["source_hash"] != slow["source_hash"]
    assert doc["seed"] == 7 and doc["device"]["name"] == "Fake H100" and "interrupted" not in doc
    assert any("tiled" in p for p in phases)


def test_a_template_that_does_not_render_is_an_error_row_without_a_worker(user_dir):
    write_template(user_dir, "broken", GOOD_BODY.replace("{{ TILE }}", "{{ NOPE }}"))
    cat = gemmlab.catalog((user_dir,))
    jobs = [(cat.get("broken"), cat.get("broken").defaults())]
    _, rows = run_jobs("compare", jobs, Shape(8, 8, 8), Options(), with_cublas=False, keep_going=True,
                       handler="handlers:FakeGpu")
    assert rows[0]["status"] == "ERROR" and "NOPE" in rows[0]["error"]


def test_a_grid_cuda_cannot_launch_is_an_error_row():
    v = gemmlab.catalog().get("tiled")  # grid y = cdiv(M, TILE): at most 65535
    _, rows = run_jobs("run", [(v, v.defaults())], Shape(2_000_000_000, 1, 1), Options(), with_cublas=False,
                       keep_going=True, handler="handlers:FakeGpu")
    assert rows[0]["status"] == "ERROR" and "grid" in rows[0]["error"]


def test_rounds_take_turns_in_alternating_order_and_report_the_median(user_dir, tmp_path, monkeypatch):
    for name in ("oob", "slow", "drift"):
        write_template(user_dir, name, GOOD_BODY)
    cat = gemmlab.catalog((user_dir,))
    jobs = [(cat.get(n), cat.get(n).defaults()) for n in ("tiled", "oob", "slow")]
    log = tmp_path / "requests.txt"
    monkeypatch.setenv("FAKEGPU_LOG", str(log))
    seen = []
    doc, rows = run_jobs("compare", jobs, Shape(64, 64, 64), Options(seed=7, timeout=5, rounds=3), keep_going=True,
                         on_row=lambda d, r: seen.append(r["variant"]), handler="handlers:FakeGpu")
    # cuBLAS, then the jobs; then back the other way; oob crashed in the first round and is not run again
    assert log.read_text().split() == ["cuBLAS", "tiled", "oob", "slow",
                                       "slow", "tiled", "cuBLAS",
                                       "cuBLAS", "tiled", "slow"]
    assert [r["variant"] for r in rows] == ["tiled", "oob", "slow", "cuBLAS"]
    assert seen == ["cuBLAS", "oob", "tiled", "slow"]  # the failure at once, the others after their last round
    tiled, oob, slow, cublas = rows
    assert oob["status"] == "CRASHED" and oob["ms"] is None and oob["rounds_ms"] is None
    assert slow["rounds_ms"] == [2.0, 2.0, 2.0] and slow["reps"] == 30 and slow["pct_cublas"] == 25.0
    assert cublas["pct_cublas"] == 100.0 and doc["rounds"] == 3


def test_a_row_has_the_median_of_its_rounds(user_dir):
    write_template(user_dir, "drift", GOOD_BODY)
    v = gemmlab.catalog((user_dir,)).get("drift")
    _, rows = run_jobs("run", [(v, v.defaults())], Shape(64, 64, 64), Options(rounds=3), keep_going=True,
                       handler="handlers:FakeGpu")
    drift, cublas = rows
    # requests: cuBLAS, drift (1.1 ms) | drift (1.2), cuBLAS | cuBLAS, drift (1.5)
    assert drift["rounds_ms"] == pytest.approx([1.1, 1.2, 1.5]) and drift["ms"] == pytest.approx(1.2)
    assert drift["ms_min"] == pytest.approx(1.1) and drift["ms_max"] == pytest.approx(1.5)


def test_one_round_keeps_rows_as_they_come_without_rounds(user_dir):
    v = gemmlab.catalog().get("tiled")
    doc, rows = run_jobs("run", [(v, v.defaults())], Shape(64, 64, 64), Options(), handler="handlers:FakeGpu")
    assert rows[0]["rounds_ms"] is None and "rounds" not in doc
