"""results/records.py: a Result as the row every table, JSON and CSV file and the history are made
from. Every field, for a pass, a failed check and an error; the row a sweep takes from the history; why a
row failed. No GPU."""

import math

import pytest

from gemmlab.compile import Resources
from gemmlab.results.check import Check
from gemmlab.results.model import Result, Shape, Timing
from gemmlab.results.records import failure_text, failures, row, row_from_history
from gemmlab.templates import Geometry

SHAPE = Shape(64, 32, 16)  # 65536 FLOPs
CLOCKS = {"sm_mhz": [1700, 1755, 1980], "samples": 4, "throttle": []}


def result(**kw):
    base = dict(name="tiled", params={"TILE": 16}, shape=SHAPE, source="cupy.matmul", user=True, dtype="fp32",
                check=Check(1e-7, 2e-6, "cupy.matmul", ratio=0.25, worst={"i": 1}, first=None, tiles=None),
                timing=Timing(2.0, 1.5, 3.0, 40, rounds=[2.5, 2.0], samples=[1.5, 2.0, 3.0], clocks=CLOCKS),
                resources=Resources(registers=40, smem=2048, stack=8, spill_stores=4, spill_loads=12, barriers=1),
                geometry=Geometry(grid=(2, 4, 1), block=(16, 16, 1), smem=1024),
                blocks_per_sm=3, compile_ms=12.5, cached=False)
    return Result(**{**base, **kw})


def test_a_passing_row_has_every_field():
    tflops = 65536 / 2e-3 / 1e12
    assert row(result(), peak_flops=1e12, cublas_ms=1.0) == {
        "variant": "tiled", "params": {"TILE": 16}, "dtype": "fp32", "source": "cupy.matmul", "user": True,
        "status": "PASS", "error": None, "rel_err": 1e-7, "max_abs_err": 2e-6, "reference": "cupy.matmul",
        "unwritten": 0, "err_bound": 0.25, "bad": 0, "check": None, "worst": {"i": 1}, "first": None, "tiles": None,
        "inputs": None, "clobbered": None, "samples_ms": [1.5, 2.0, 3.0], "clocks": CLOCKS,
        "ms": 2.0, "ms_min": 1.5, "ms_max": 3.0, "reps": 40, "rounds_ms": [2.5, 2.0],
        "registers": 40, "smem_static": 2048, "smem_dynamic": 1024, "stack": 8, "spills": 16,
        "grid": [2, 4, 1], "block": [16, 16, 1], "blocks_per_sm": 3, "compile_ms": 12.5, "cached": False,
        "tflops": pytest.approx(tflops), "gflops": pytest.approx(tflops * 1e3),
        "pct_peak": pytest.approx(100 * tflops), "pct_cublas": 50.0,
    }


def test_a_failed_check_has_no_time_and_says_where():
    bad = Check(0.3, 5.0, "cupy.matmul", unwritten=2, bad=7, ratio=9.0, worst={"i": 0, "j": 1, "expected": 1.0,
                                                                               "got": 6.0, "bound": 0.5},
                first={"i": 0, "j": 0, "expected": 1.0, "got": 2.0, "bound": 0.5}, tiles={"bad": 1, "total": 4, "tile": [16, 16]},
                inputs="ones", clobbered=["A: 1 element changed, first at (0, 0)"])
    d = row(result(check=bad), peak_flops=1e12, cublas_ms=1.0)
    assert d["status"] == "FAIL" and d["check"] == bad.summary() and d["inputs"] == "ones"
    assert (d["rel_err"], d["max_abs_err"], d["unwritten"], d["bad"], d["err_bound"]) == (0.3, 5.0, 2, 7, 9.0)
    assert d["clobbered"] == ["A: 1 element changed, first at (0, 0)"] and d["tiles"]["bad"] == 1
    assert d["first"]["got"] == 2.0 and d["worst"]["got"] == 6.0
    for key in ("ms", "ms_min", "ms_max", "reps", "rounds_ms", "samples_ms", "clocks", "tflops", "gflops",
                "pct_peak", "pct_cublas"):
        assert d[key] is None, key  # a wrong answer has no time
    assert d["registers"] == 40 and d["grid"] == [2, 4, 1]  # what it compiled to still shows
    assert failure_text(d) == bad.summary()


def test_an_error_row_has_nothing_measured():
    d = row(Result("typo", {"TILE": 8}, SHAPE, error="does not compile"), peak_flops=1e12, cublas_ms=1.0)
    assert d["status"] == "ERROR" and d["error"] == "does not compile" and d["source"] == ""
    assert all(d[k] is None for k in ("rel_err", "max_abs_err", "reference", "unwritten", "err_bound", "bad", "check",
                                      "worst", "first", "tiles", "inputs", "clobbered", "ms", "registers", "smem_static",
                                      "smem_dynamic", "stack", "spills", "grid", "block", "blocks_per_sm", "tflops"))
    assert d["user"] is False and d["dtype"] == "fp32"
    crashed = row(Result("oob", {}, SHAPE, fault="CRASHED", error="illegal address"), 1e12)
    assert crashed["status"] == "CRASHED" and failure_text(crashed) == "illegal address"


def test_without_cublas_there_is_no_share_of_it():
    d = row(result(), peak_flops=1e12)
    assert d["pct_cublas"] is None and d["tflops"] == pytest.approx(65536 / 2e-3 / 1e12)


def test_a_row_from_the_history():
    h = {"id": 5, "variant": "tiled", "params": {"TILE": 16}, "M": 64, "N": 32, "K": 16, "template": "/x/tiled.cu.j2",
         "dtype": "bf16", "rel_err": 1e-7, "ms": 4.0, "source_hash": "abc", "samples": [3.9, 4.0, 4.1]}
    d = row_from_history(h, peak_flops=1e12, cublas_ms=2.0)
    assert (d["variant"], d["params"], d["status"], d["ms"], d["ms_min"], d["ms_max"]) == ("tiled", {"TILE": 16}, "PASS", 4.0, 4.0, 4.0)
    assert d["tflops"] == pytest.approx(65536 / 4e-3 / 1e12) and d["pct_cublas"] == 50.0 and d["reps"] == 0
    assert d["samples_ms"] == [3.9, 4.0, 4.1] and d["rel_err"] == 1e-7 and math.isnan(d["max_abs_err"])
    assert d["reference"] == "history" and d["source"] == "tiled.cu.j2" and d["dtype"] == "bf16"
    assert (d["source_hash"], d["vs_last"], d["vs_last_text"], d["changed"]) == ("abc", None, "from history #5", "")
    assert row_from_history(dict(h, template=None, samples=None), 1e12)["source"] == ""


@pytest.mark.parametrize("status,bad", [("PASS", False), ("-", False), ("FAIL", True), ("ERROR", True),
                                        ("CRASHED", True), ("TIMEOUT", True)])
def test_failures_are_the_rows_without_a_time(status, bad):
    rows = [{"status": "PASS"}, {"status": status}]
    assert failures(rows) == ([{"status": status}] if bad else [])


@pytest.mark.parametrize("r,text", [
    ({"error": "boom", "check": "x", "unwritten": 3}, "boom"),
    ({"error": None, "check": "7 of the elements out of bound", "unwritten": 3}, "7 of the elements out of bound"),
    ({"error": None, "check": None, "unwritten": 3}, "3 elements of C never written"),
    ({"error": None, "unwritten": 0, "rel_err": 0.0123, "tol": 1e-4}, "relative error 1.23e-02 > tolerance 1e-04"),
    ({"error": None, "unwritten": 0, "rel_err": 0.5}, "wrong result"),
])
def test_failure_text(r, text):
    assert failure_text(r) == text
