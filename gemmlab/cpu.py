"""The CPU baseline of seed 002: numpy.matmul (whatever BLAS numpy was built with) in FP32, timed
with the wall clock, median of several calls. It puts the GPU's numbers in proportion; it needs no
GPU, so it also runs in CI."""

from __future__ import annotations

import os
import time

import numpy as np


def numpy_row(M: int, N: int, K: int, min_reps: int = 3, min_time_s: float = 0.2, seed: int = 0) -> dict:
    """A result row for numpy.matmul at M x N x K: checked against float64 on the same inputs."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = A @ B  # warm-up, and the result to check
    ref = A.astype(np.float64) @ B.astype(np.float64)
    rel = float(np.linalg.norm(C - ref) / (np.linalg.norm(ref) or 1.0))
    times, start = [], time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_time_s:
        t0 = time.perf_counter()
        np.matmul(A, B, out=C)
        times.append(time.perf_counter() - t0)
    ms = float(np.median(times)) * 1e3
    tflops = 2 * M * N * K / (ms * 1e-3) / 1e12
    return {"variant": "numpy (CPU)", "params": {"threads": os.cpu_count()}, "status": "PASS" if rel < 1e-5 else "FAIL",
            "error": None, "rel_err": rel, "ms": ms, "tflops": tflops, "gflops": tflops * 1e3, "reps": len(times)}
