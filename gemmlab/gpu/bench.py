"""Time a launch: CUDA events around each repetition, the L2 flushed before each one, warm-up first,
the median (as Triton's do_bench). The samples are kept, and the SM clock while they ran."""

from __future__ import annotations

import math

import numpy as np

from ..results.model import FLUSH_BYTES, Timing
from ..gpu.clocks import ClockWatch
from .driver import cuda


def evict_l2(buf) -> None:
    """Evict L2 by reading `buf`, larger than any L2: the next call starts cold, and the lines it evicts
    are clean. Writing the buffer instead (as Triton's do_bench does) leaves L2 full of dirty lines whose
    write-back the timed call pays: on an H100 that added 3-6 us (10-20%) to decode GEMMs that read
    32-50 MB, cuBLAS's and ours alike (docs/checking.md)."""
    buf.sum(dtype=buf.dtype if buf.dtype.kind == "f" else "uint64")


def bench(fn, min_reps: int = 10, min_time_ms: float = 100.0, max_reps: int = 1000,
          flush: bool = True, phase=None) -> Timing:
    """Median time of fn() in ms: events around each call, L2 flushed before each call. `phase(text,
    seconds)` is told how long the timed repetitions should take (a worker's time limit allows for it)."""
    cupy = cuda()
    buf = cupy.empty(FLUSH_BYTES, dtype=cupy.uint8) if flush else None

    def timed(n: int) -> list[float]:
        starts = [cupy.cuda.Event() for _ in range(n)]
        ends = [cupy.cuda.Event() for _ in range(n)]
        for s, e in zip(starts, ends):
            if buf is not None:
                evict_l2(buf)  # A, B and C leave L2: every repetition starts cold, as a real one would
            s.record()
            fn()
            e.record()
        ends[-1].synchronize()
        return [cupy.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends)]

    if phase:
        phase("warm up")
    first = timed(1)[0]  # warm-up, and an estimate of one call
    warm = min(max(1, math.ceil(25.0 / max(first, 1e-3))), 50)
    est = float(np.median(timed(warm)))
    reps = min(max(min_reps, math.ceil(min_time_ms / max(est, 1e-3))), max(max_reps, min_reps))
    if phase:
        phase(f"time {reps} repetitions", reps * est * 1e-3)
    with ClockWatch() as clocks:
        times = timed(reps)
    # CUDA events resolve about half a microsecond: the samples are kept to the nanosecond (6 decimals of ms)
    return Timing(float(np.median(times)), float(min(times)), float(max(times)), reps,
                  samples=[round(t, 6) for t in times],
                  clocks=clocks.summary())
