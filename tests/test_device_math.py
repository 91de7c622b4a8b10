"""Peak arithmetic and result rows: plain Python, no GPU."""

import math

import pytest

from gemmlab import GemmlabError
from gemmlab.gpu.device import DeviceInfo, dram_bandwidth, fp32_lanes, fp32_peak
from gemmlab.results.check import Check
from gemmlab.results.model import Result, Shape, Timing
from gemmlab.present import markdown
from gemmlab.results import metrics, records


def h100(**kw) -> DeviceInfo:
    base = dict(index=0, name="NVIDIA H100 80GB HBM3", cc=(9, 0), sms=132, clock_khz=1980000,
                mem_clock_khz=2619000, bus_width_bits=5120, l2_bytes=50 << 20, memory_bytes=80 << 30,
                smem_per_block=49152, smem_optin=232448, smem_per_sm=233472, regs_per_sm=65536,
                max_threads_per_sm=2048, driver="13.0", runtime="13.2")
    base.update(kw)
    return DeviceInfo(**base)


def test_h100_peaks():
    d = h100()
    assert d.arch == "sm_90" and d.lanes == 128
    assert d.peak_fp32 / 1e12 == pytest.approx(66.9, abs=0.05)
    assert d.bandwidth / 1e12 == pytest.approx(3.35, abs=0.01)
    how = dict((q, h) for q, _, h in d.derivation())
    assert "132 SMs x 128 FP32 lanes/SM" in how["FP32 peak"] and "1980 MHz" in how["FP32 peak"]


def test_lanes_by_architecture():
    assert fp32_lanes((8, 0)) == 64 and fp32_lanes((8, 6)) == 128
    assert fp32_peak(108, 64, 1410000) / 1e12 == pytest.approx(19.5, abs=0.05)  # A100
    assert dram_bandwidth(1215000, 5120) / 1e12 == pytest.approx(1.555, abs=0.01)  # A100 40GB
    with pytest.raises(GemmlabError, match="FP32 lanes"):
        fp32_lanes((5, 0))


def test_shapes_are_validated():
    assert Shape(2, 3, 4).flops == 48
    for bad in ((0, 1, 1), (1, -3, 1), (1, 1, 2.5)):
        with pytest.raises(GemmlabError, match="positive integer"):
            Shape(*bad)
    with pytest.raises(GemmlabError, match="32-bit"):
        Shape(50000, 50000, 8)


def test_check_passes_only_when_every_element_is_right():
    assert Check(1e-7, 1e-5, "cupy.matmul").passed
    assert not Check(1e-7, 1e-3, "cupy.matmul", bad=1).passed  # one element past its bound is enough
    assert not Check(math.nan, math.nan, "cupy.matmul").passed
    assert not Check(0.0, 0.0, "cupy.matmul", unwritten=3, bad=3).passed
    assert not Check(0.0, 0.0, "cupy.matmul", clobbered=["A: 1 element changed, first at (0, 0)"]).passed


def _result(name, ms, passed=True, **kw):
    r = Result(name, {"TILE": 32}, Shape(4096, 4096, 4096), **kw)
    r.check = Check(1e-7, 0.0, "cupy.matmul", bad=0 if passed else 5)
    r.timing = Timing(ms, ms * 0.99, ms * 1.01, 10)
    return r


def test_rows_and_speedups():
    peak = h100().peak_fp32
    rows = [records.row(_result("naive", 100.0), peak, 2.0), records.row(_result("tiled", 10.0), peak, 2.0),
            records.row(_result("broken", 1.0, passed=False), peak, 2.0),
            records.row(_result("cuBLAS", 2.0), peak, 2.0)]
    metrics.add_speedups(rows)
    tiled = rows[1]
    assert tiled["tflops"] == pytest.approx(2 * 4096**3 / 10e-3 / 1e12)
    assert tiled["pct_cublas"] == pytest.approx(20.0) and tiled["speedup_prev"] == pytest.approx(10.0)
    broken = rows[2]
    assert broken["status"] == "FAIL" and broken["ms"] is None and broken["tflops"] is None
    assert records.failures(rows) == [broken]
    md = markdown.markdown({"rows": rows})
    assert "| tiled | TILE=32 | 10.000 |" in md and "| broken | TILE=32 | **FAIL**: 5 elements out of bound on the random inputs" in md


def test_the_l2_flush_reads_its_buffer_and_writes_nothing():
    """bench's flush evicts L2 by reading: a written buffer would leave dirty lines whose write-back the
    timed call pays (docs/checking.md). Checked here on numpy, which has the same array methods."""
    import numpy as np
    from gemmlab.gpu.bench import evict_l2
    for buf in (np.arange(1000, dtype=np.uint8), np.linspace(-1, 1, 1000, dtype=np.float32)):
        before = buf.copy()
        evict_l2(buf)
        assert np.array_equal(buf, before)
