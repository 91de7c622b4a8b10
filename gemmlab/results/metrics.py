"""The numbers a row derives from its measurement, declared once: adding a metric is adding one entry.

Each Metric computes its value from the row (whose `ms` is set only for a passing check) and the run's
context: the shape's FLOPs, the device's peak for the input type, and cuBLAS's time in the same run.
A metric that cannot be computed (no time, no cuBLAS) is None. A suite's rows also have the roofline
metrics (ROOFLINE, derive_roofline), which need the shape's bytes and the measured copy bandwidth.
Speed-ups rung over rung need the rows in ladder order: add_speedups. (A row's change against its last
run is the history's: results/history.py's delta.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Context:
    flops: int                  # 2 M N K
    peak_flops: float           # the device's peak for the input type, FLOP/s
    cublas_ms: float | None     # cuBLAS's median in the same run


@dataclass(frozen=True)
class Metric:
    key: str
    what: str
    value: Callable[[dict, Context], float | None]


def _tflops(r: dict, c: Context):
    return c.flops / (r["ms"] * 1e-3) / 1e12 if r["ms"] else None


METRICS = (  # in order: a metric may use the ones before it
    Metric("tflops", "TFLOP/s: 2 M N K over the median time", _tflops),
    Metric("gflops", "GFLOP/s", lambda r, c: r["tflops"] * 1e3 if r["tflops"] else None),
    Metric("pct_peak", "% of the device's peak for the input type",
           lambda r, c: 100 * r["tflops"] * 1e12 / c.peak_flops if r["tflops"] else None),
    Metric("pct_cublas", "% of cuBLAS's speed in the same run: its time over ours",
           lambda r, c: 100 * c.cublas_ms / r["ms"] if r["ms"] and c.cublas_ms else None),
)


def derive(row: dict, context: Context, metrics: tuple[Metric, ...] = METRICS) -> dict:
    """Every metric of `row`, set in place (and the row returned)."""
    for m in metrics:
        row[m.key] = m.value(row, context)
    return row


@dataclass(frozen=True)
class Roofline:
    flops: int              # 2 M N K
    min_bytes: int          # what every algorithm moves at least: A and B read once, C written once
    peak_flops: float       # the device's peak for the input type, FLOP/s
    bandwidth: float        # the measured copy bandwidth, bytes/s
    cublas_tflops: float | None


def bound_flops(c: Roofline) -> float:
    """The roofline bound, FLOP/s: the peak, or intensity x bandwidth where that is lower."""
    return min(c.peak_flops, c.flops / c.min_bytes * c.bandwidth)


ROOFLINE = (
    Metric("ai", "arithmetic intensity: FLOPs over the bytes every algorithm moves", lambda r, c: c.flops / c.min_bytes),
    Metric("bound", "which ceiling bounds the shape: memory (intensity x bandwidth) or compute (the peak)",
           lambda r, c: "memory" if r["ai"] * c.bandwidth < c.peak_flops else "compute"),
    Metric("bound_tflops", "the roofline bound, TFLOP/s", lambda r, c: bound_flops(c) / 1e12),
    Metric("pct_bound", "% of the roofline bound",
           lambda r, c: 100 * r["tflops"] * 1e12 / bound_flops(c) if r["tflops"] else None),
    Metric("x_cublas", "speed over cuBLAS's on the same shape in the same run",
           lambda r, c: r["tflops"] / c.cublas_tflops if r["tflops"] and c.cublas_tflops else None),
)


def derive_roofline(row: dict, context: Roofline) -> dict:
    """The roofline metrics of a suite's row (which has its other metrics already), set in place."""
    return derive(row, context, ROOFLINE)


# The rows of the yardstick a run times beside its kernels: cuBLAS for GEMM, cupy for the other problems;
# and GEMM's optional references beside cuBLAS (--refs: gemmlab/gpu/references.py).
YARDSTICKS = frozenset({"cuBLAS", "cupy"})
REFERENCES = YARDSTICKS | {"cuBLASLt", "Triton"}


def is_reference(row: dict) -> bool:
    return row["variant"] in REFERENCES


def is_yardstick(row: dict) -> bool:
    """The row every other row's % of cuBLAS (x cupy) is of."""
    return row["variant"] in YARDSTICKS


def add_speedups(rows: list[dict]) -> None:
    """Speed-up of each kernel row over the previous one and over the first (naive) one. A row that
    failed has no time: the next row's speed-up is over the last one that had one."""
    kernels = [r for r in rows if not is_reference(r)]
    first = kernels[0]["ms"] if kernels else None
    prev = None
    for r in kernels:
        r["speedup_prev"] = prev / r["ms"] if prev and r["ms"] else None
        r["speedup_first"] = first / r["ms"] if first and r["ms"] else None
        prev = r["ms"] or prev
