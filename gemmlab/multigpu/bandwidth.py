"""`gemmlab dist --measure`: NCCL's bus bandwidth between the job's GPUs, as nccl-tests reports it.

    all-gather   each rank gives S bytes and receives P x S; bus bandwidth (P - 1) x S / time
    send/recv    each rank sends S bytes to the next rank and receives S from the one before, in one group
                 (a ring step, as the ring schedule makes it); bus bandwidth S / time

Both are "bytes each GPU sends per second", so a schedule's bytes sent over its exposed time compares
with them directly. Timed as the schedules are (gemmlab/multigpu/rank.py): repetitions started together,
the slowest rank's time, the median.

Where nccl4py is there (the communicator is then gemmlab/multigpu/comm.py's CopyEngineNccl), also:

    all-gather (copy engines)   the same all-gather, its buffers in symmetric windows: NCCL moves it with
                                the copy engines, no kernel
    ... beside a full GPU       the all-gather of BESIDE_MB, started together with a kernel that fills
                                every SM for HOG_MS (on the compute stream), timed on its own stream from
                                that start to its end: one that needs SMs waits for the kernel (about
                                HOG_MS more), one that needs none takes its time alone
"""

from __future__ import annotations

from .rows import slowest

SIZES_MB = (1, 8, 64, 256)
BESIDE_MB, HOG_MS = 64, 1.0


def measure(rank) -> list[dict]:
    """Rows for every size and operation (rank 0's are the ones kept); `rank` is a rank.Rank."""
    rt, comm, P, r, xp = rank.rt, rank.comm, rank.ranks, rank.rank, rank.rt.xp
    ce = getattr(comm, "copy_engines", False)
    out = []
    for mb in SIZES_MB:
        n = mb * 2**20
        send = xp.ones(n, dtype=xp.uint8)
        whole = xp.empty(P * n, dtype=xp.uint8)
        back = xp.empty(n, dtype=xp.uint8)
        ops = {"all-gather": (lambda: comm.allgather(send, whole, rt.compute), (P - 1) * n),
               "send/recv": (lambda: comm.exchange([(send, (r + 1) % P)], [(back, (r - 1) % P)], rt.compute), n)}
        if ce:
            sym = comm.symmetric((P * n,), xp.uint8)  # in place: the rank's share is its slice of the window
            mine = sym[r * n:(r + 1) * n]
            ops["all-gather (copy engines)"] = (lambda: comm.allgather(mine, sym, rt.compute), (P - 1) * n)
        for op, (fn, sent) in ops.items():
            if P == 1:
                continue
            rank.report.phase(f"{op} of {mb} MB per rank")
            out.append(_row(op, mb, P, sent, rank.timing(lambda: _on(rt, fn))))
            if mb == BESIDE_MB and op.startswith("all-gather"):
                out.append(_beside(rank, op, mb, sent, whole if op == "all-gather" else sym,
                                   send if op == "all-gather" else mine))
        del send, whole, back
    return out


def _beside(rank, op: str, mb: int, sent: int, whole, send) -> dict:
    """The all-gather beside a kernel on every SM, timed on the comm stream from the kernel's start."""
    rt, comm = rank.rt, rank.comm
    label = f"{op} beside a full GPU"
    rank.report.phase(f"{label}, {mb} MB per rank")

    def start_together():  # the comm stream goes on where the compute stream starts the kernel
        rt.wait(rt.comm, rt.record(rt.compute))
        rt.hog(rt.compute, int(HOG_MS * 1e6))

    every = rank.timing(lambda: comm.allgather(send, whole, rt.comm), stream=rt.comm, before=start_together)
    row = _row(label, mb, rank.ranks, sent, every)
    row["hog_ms"] = HOG_MS
    return row


def _row(op: str, mb: int, P: int, sent: int, every) -> dict:
    ms, per_rank = slowest(every)
    n = mb * 2**20
    return {"op": op, "mb_per_rank": mb, "us": ms * 1e3, "busbw_gbs": sent / (ms * 1e-3) / 1e9,
            "algbw_gbs": (P * n if op.startswith("all-gather") else n) / (ms * 1e-3) / 1e9, "gpus": P,
            "status": "PASS", "ms_ranks": per_rank}


def _on(rt, fn):
    with rt.on(rt.compute):
        fn()
