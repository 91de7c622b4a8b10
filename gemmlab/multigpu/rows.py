"""A distributed run's rows: what the ranks' timings and the check come to. Plain Python (no GPU).

The time of a repetition is its slowest rank's (each repetition starts on every rank together, after a
barrier), and a row's time is the median over repetitions. Beside it:

    compute_ms     the same local GEMMs alone, timed the same way: what the schedule would take if its
                   communication were free
    exposed_ms     ms - compute_ms: communication that nothing hid (never below 0)
    pct_peak       the tensor cores' use on each GPU: its local GEMMs' FLOPs / (ms x the GPU's peak)
    efficiency     one GPU's time for the whole problem with our kernel / (GPUs x ms)
    x_baseline     the schedule's NCCL + cuBLAS baseline (no overlap) / ms
    sent_mb        bytes each GPU sends (the schedule's arithmetic); comm_gbs = sent / exposed time, for a
                   row whose communication hides behind nothing: comparable with nccl-tests' bus bandwidth
    timeline       (--timeline, an arrival step's schedule only) per rank, the median over the timed
                   repetitions of the milliseconds from the repetition's start on the comm stream to:
                   barrier_ms (its barrier done; None without one), chunks_ms (each chunk's rows landed,
                   just before its flag), gemm_start_ms and gemm_end_ms (the GEMM's launch reached on the
                   compute stream, and the GEMM done)
"""

from __future__ import annotations

import numpy as np

from ..results.records import params_text


def slowest(every) -> tuple[float, list[float]]:
    """(median over repetitions of the slowest rank, each rank's median) from a ranks x reps array."""
    every = np.asarray(every, dtype=float)
    return float(np.median(every.max(axis=0))), [float(x) for x in np.median(every, axis=1)]


def row(item, sched, plan, shape, ranks: int, peak: float, params: dict, total=None, compute=None,
        check=None, bad_ranks=(), error: str | None = None, timeline=None) -> dict:
    """One row. `total` and `compute` are ranks x reps arrays of ms (None for a row never timed); `check`
    a results.check.Check; `timeline` a ranks x (reps x events) array of ms (timeline below), or None."""
    r = {"schedule": item.schedule, "kernel": item.kernel, "params": dict(params) if item.kernel != "cuBLAS" else {},
         "role": item.role, "baseline": sched.baseline, "overlap": bool(item.overlap and sched.overlaps), "gpus": ranks,
         "grid": "x".join(map(str, plan.grid)), "sent_mb": plan.sent / 1e6, "gemms": [list(g) for g in plan.gemms],
         "status": "ERROR" if error else "-", "error": error, "ms": None, "ms_ranks": None, "compute_ms": None,
         "exposed_ms": None, "tflops": None, "tflops_per_gpu": None, "pct_peak": None, "comm_gbs": None,
         "efficiency": None, "x_baseline": None, "bad_ranks": list(bad_ranks) or None}
    if check is not None:
        r.update(status="PASS" if check.passed else "FAIL", rel_err=check.rel_err, err_bound=check.ratio,
                 bad=check.bad, reference=check.reference,
                 check=None if check.passed else
                 f"rank{'s' if len(bad_ranks) > 1 else ''} {', '.join(map(str, bad_ranks)) or '?'}: {check.summary()}",
                 worst=check.worst, first=check.first)
    if total is not None and r["status"] == "PASS":
        ms, per_rank = slowest(total)
        compute_ms, _ = slowest(compute)
        exposed = max(0.0, ms - compute_ms)
        r.update(ms=ms, ms_ranks=per_rank, compute_ms=compute_ms, exposed_ms=exposed,
                 tflops=shape.flops / (ms * 1e-3) / 1e12, pct_peak=100 * plan.flops / (ms * 1e-3) / peak,
                 reps=int(np.asarray(total).shape[1]))
        r["tflops_per_gpu"] = r["tflops"] / ranks
        if plan.sent and not r["overlap"] and exposed > 0:
            r["comm_gbs"] = plan.sent / (exposed * 1e-3) / 1e9
        if timeline is not None:
            r["timeline"] = timeline_of(timeline, r["reps"])
    return r


def timeline_of(every, reps: int) -> list[dict]:
    """Each rank's timeline (the row's `timeline`) from a ranks x (reps x events) array of ms after each
    repetition's start, events in execute.py's order after the start: the barrier (NaN: none), each
    chunk, the GEMM's start and end. The median of each event over the repetitions."""
    every = np.asarray(every, dtype=float)
    medians = np.median(every.reshape(every.shape[0], reps, -1), axis=1)

    def ms(x):
        return None if np.isnan(x) else float(x)
    return [{"rank": rank, "barrier_ms": ms(m[0]), "chunks_ms": [ms(x) for x in m[1:-2]],
             "gemm_start_ms": ms(m[-2]), "gemm_end_ms": ms(m[-1])} for rank, m in enumerate(medians)]


def one_gpu(r: dict, shape) -> dict:
    """A single-GPU row of jobs.run_jobs (our kernel or cuBLAS on the whole problem) as a dist row."""
    return {"schedule": "one GPU", "kernel": r["variant"], "params": r["params"], "role": "one GPU",
            "overlap": False, "gpus": 1, "grid": "1", "sent_mb": 0.0, "status": r["status"], "error": r.get("error"),
            "ms": r["ms"], "ms_ranks": [r["ms"]] if r["ms"] else None, "compute_ms": r["ms"], "exposed_ms": 0.0 if r["ms"] else None,
            "tflops": r["tflops"], "tflops_per_gpu": r["tflops"], "pct_peak": r["pct_peak"], "comm_gbs": None,
            "efficiency": None, "x_baseline": None, "bad_ranks": None, "rel_err": r.get("rel_err"),
            "err_bound": r.get("err_bound"), "check": r.get("check"), "gemms": [[shape.M, shape.N, shape.K]]}


def finish(rows: list[dict]) -> None:
    """Fill in what needs other rows: efficiency against our kernel on one GPU, speed-up over the baseline."""
    one = next((r["ms"] for r in rows if r.get("role") == "one GPU" and r["kernel"] != "cuBLAS" and r["ms"]), None)
    base = {r["schedule"]: r["ms"] for r in rows if r.get("role") == "baseline" and r["ms"]}
    for r in rows:
        if r.get("ms") and r.get("role") in ("ours", "baseline"):
            r["efficiency"] = one / (r["gpus"] * r["ms"]) if one else None
            b = base.get(r.get("baseline"))
            r["x_baseline"] = b / r["ms"] if b and r["role"] != "baseline" else None


def label(r: dict) -> str:
    """The GEMM of a row: cuBLAS, or the variant and its parameters."""
    return r["kernel"] if r["kernel"] == "cuBLAS" else f"{r['kernel']} {params_text(r['params'])}"
