"""`gemmlab dist --measure`: NCCL's bus bandwidth between the job's GPUs, as nccl-tests reports it.

    all-gather   each rank gives S bytes and receives P x S; bus bandwidth (P - 1) x S / time
    send/recv    each rank sends S bytes to the next rank and receives S from the one before, in one group
                 (a ring step, as the ring schedule makes it); bus bandwidth S / time

Both are "bytes each GPU sends per second", so a schedule's bytes sent over its exposed time compares
with them directly. Timed as the schedules are (gemmlab/multigpu/rank.py): repetitions started together,
the slowest rank's time, the median.
"""

from __future__ import annotations

from .rows import slowest

SIZES_MB = (1, 8, 64, 256)


def measure(rank) -> list[dict]:
    """Rows for every size and operation (rank 0's are the ones kept); `rank` is a rank.Rank."""
    rt, comm, P, r, xp = rank.rt, rank.comm, rank.ranks, rank.rank, rank.rt.xp
    out = []
    for mb in SIZES_MB:
        n = mb * 2**20
        send = xp.ones(n, dtype=xp.uint8)
        whole = xp.empty(P * n, dtype=xp.uint8)
        back = xp.empty(n, dtype=xp.uint8)
        ops = {"all-gather": (lambda: comm.allgather(send, whole, rt.compute), (P - 1) * n),
               "send/recv": (lambda: comm.exchange([(send, (r + 1) % P)], [(back, (r - 1) % P)], rt.compute), n)}
        for op, (fn, sent) in ops.items():
            if P == 1:
                continue
            rank.report.phase(f"{op} of {mb} MB per rank")
            ms, per_rank = slowest(rank.timing(lambda: _on(rt, fn)))
            out.append({"op": op, "mb_per_rank": mb, "us": ms * 1e3, "busbw_gbs": sent / (ms * 1e-3) / 1e9,
                        "algbw_gbs": (P * n if op == "all-gather" else n) / (ms * 1e-3) / 1e9, "gpus": P,
                        "status": "PASS", "ms_ranks": per_rank})
        del send, whole, back
    return out


def _on(rt, fn):
    with rt.on(rt.compute):
        fn()
