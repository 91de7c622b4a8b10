"""The 12-shape suite of seed 001 (MIT 6.S894 lab 5), with the roofline bound of each shape.

A shape's arithmetic intensity is its FLOPs over the bytes it must move at least once (read A and
B, write C, in FP32). Its bound is the lower of the FP32 peak and intensity x the measured copy
bandwidth: above the ridge point (peak / bandwidth) the shape is compute-bound, below it
memory-bound. The course's targets are percentages of that bound ("of the maximum available
throughput"), which is why 1 x 3072 x 3072, a matrix-vector product, can have a 40% target. Nothing
here needs a GPU.
"""

from __future__ import annotations

from .results.model import Shape

# (M, N, K), the course's target in % of the roofline bound (None: no target)
SHAPES: list[tuple[tuple[int, int, int], int | None]] = [
    ((3072, 3072, 3072), 40),
    ((512, 3072, 3072), 40), ((256, 3072, 3072), 35), ((128, 3072, 3072), 35), ((64, 3072, 3072), 40),
    ((32, 3072, 3072), 40), ((16, 3072, 3072), 40), ((1, 3072, 3072), 40),
    ((256, 256, 256), None), ((256, 256, 1024), None), ((256, 256, 8192), 25), ((128, 128, 32768), 40),
]


def min_bytes(shape: Shape) -> int:
    """FP32 bytes every algorithm moves at least: A and B read once, C written once."""
    return 4 * (shape.M * shape.K + shape.K * shape.N + shape.M * shape.N)


def roofline(shape: Shape, peak_flops: float, bandwidth: float) -> dict:
    """Intensity (FLOP/byte), the bound (FLOP/s), and which ceiling sets it."""
    ai = shape.flops / min_bytes(shape)
    memory_bound = ai * bandwidth
    return {"ai": ai, "bound_flops": min(peak_flops, memory_bound),
            "bound": "memory" if memory_bound < peak_flops else "compute", "ridge_ai": peak_flops / bandwidth}


def annotate(row: dict, shape: Shape, target: int | None, peak_flops: float, bandwidth: float,
             cublas_tflops: float | None) -> dict:
    """Add the suite's columns to a result row: shape, intensity, bound, % of bound, x cuBLAS, target."""
    roof = roofline(shape, peak_flops, bandwidth)
    tflops = row["tflops"]
    pct_bound = 100 * tflops * 1e12 / roof["bound_flops"] if tflops else None
    row.update(shape=str(shape), ai=roof["ai"], bound=roof["bound"], bound_tflops=roof["bound_flops"] / 1e12,
               pct_bound=pct_bound, x_cublas=tflops / cublas_tflops if tflops and cublas_tflops else None,
               target_pct=target,
               met=None if target is None or row["variant"] == "cuBLAS" else bool(pct_bound and pct_bound >= target))
    return row
