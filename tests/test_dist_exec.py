"""Every schedule run end to end on a CPU: fake ranks (threads), numpy GEMMs, NCCL's semantics, and
streams run in the most hostile order their events allow. The gathered C must be the product, and each
rank must send the bytes the schedule's arithmetic says."""

import numpy as np
import pytest

from gemmlab.multigpu import schedule as sch
from gemmlab.multigpu.execute import RankRun, gather
from gemmlab.multigpu.inputs import Reference
from gemmlab.results.model import Shape
from dist_fakes import FakeComm, FakeRuntime, numpy_gemm, run_ranks

CASES = [("allgather", n) for n in (1, 2, 3, 4)] + [("reduce_scatter", n) for n in (1, 2, 3, 4)] + \
        [("ring", n) for n in (1, 2, 3, 4, 5)] + [("summa", n) for n in (1, 4, 9)]


def run_schedule(name, ranks, shape, policy="compute", overlap=True, dtype="bf16", seed=5, repeat=2, sync=True):
    sched = sch.get(name)
    plans = [sch.rank_plan(sched, shape, ranks, r, dtype) for r in range(ranks)]

    def body(world, rank):
        rt = FakeRuntime(policy)
        comm = FakeComm(world, rank, rt)
        run = RankRun(sched, plans[rank], shape, dtype, seed, rt, comm, numpy_gemm(rt, dtype), overlap)
        run.poison()
        snapshots = []
        for _ in range(repeat):  # a second repetition must find its inputs as the first did
            run.once()
            rt.enqueue(rt.compute, lambda: snapshots.append(run.C.copy()))  # C as this repetition left it
            if sync:
                rt.synchronize()
        rt.synchronize()
        assert all(np.array_equal(x, run.C) for x in snapshots), "a repetition's C differs from the last one's"
        return gather(run, plans, shape, comm, rt)
    out, world = run_ranks(ranks, body)
    return out[0], plans, world


@pytest.mark.parametrize("name,ranks", CASES)
@pytest.mark.parametrize("policy", ["compute", "comm"])
def test_each_schedule_computes_the_product(name, ranks, policy):
    shape = Shape(36, 60, 48)  # divisible by 1..5 where each schedule splits, and by 3 for the 3 x 3 grid
    if name == "ring" and ranks == 5:
        shape = Shape(40, 60, 48)
    C, plans, world = run_schedule(name, ranks, shape, policy)
    ref = Reference(np, 5, shape.M, shape.N, shape.K, "bf16")
    verdict, bad = ref.check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed and bad == [], verdict.summary()


@pytest.mark.parametrize("name,ranks", [("ring", 4), ("summa", 4)])
@pytest.mark.parametrize("policy", ["compute", "comm"])
def test_repetitions_queued_back_to_back(name, ranks, policy):
    """Warm-ups queue repetitions without waiting: the next one's transfers must wait for this one's GEMMs."""
    shape = Shape(36, 60, 48)
    C, plans, _ = run_schedule(name, ranks, shape, policy, repeat=3, sync=False)
    verdict, _ = Reference(np, 5, 36, 60, 48, "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed, verdict.summary()


@pytest.mark.parametrize("name,ranks", [("ring", 3), ("summa", 4), ("allgather", 2), ("reduce_scatter", 3)])
def test_bytes_sent_are_the_arithmetics(name, ranks):
    shape = Shape(36, 60, 48)
    _, plans, world = run_schedule(name, ranks, shape, repeat=1)
    for p in plans:
        sent = sum(b for r, op, b in world.log if r == p.rank)
        gathered = p.C.size * 4 if p.rank else 0  # the check's gather of C to rank 0 is not the schedule's
        assert sent - gathered == p.sent


@pytest.mark.parametrize("name,ranks", [("ring", 4), ("summa", 4)])
def test_without_overlap_the_same_product(name, ranks):
    shape = Shape(36, 60, 48)
    C, plans, _ = run_schedule(name, ranks, shape, overlap=False)
    verdict, _ = Reference(np, 5, *(36, 60, 48), "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed


def test_a_wrong_block_names_its_rank():
    shape = Shape(36, 60, 48)
    C, plans, _ = run_schedule("ring", 3, shape)
    p = plans[2]
    C[p.C.row0 + 5, p.C.col0 + 1] += 1.0
    verdict, bad = Reference(np, 5, 36, 60, 48, "bf16").check(np, C, [(q.rank, q.C) for q in plans])
    assert not verdict.passed and verdict.bad == 1 and bad == [2]


def test_compute_only_runs_the_same_gemms():
    shape = Shape(36, 60, 48)
    sched = sch.get("ring")
    plans = [sch.rank_plan(sched, shape, 2, r) for r in range(2)]

    def body(world, rank):
        rt = FakeRuntime()
        run = RankRun(sched, plans[rank], shape, "bf16", 5, rt, FakeComm(world, rank, rt), numpy_gemm(rt, "bf16"))
        run.compute_only()
        rt.synchronize()
        return len(run.gemms)
    out, world = run_ranks(2, body)
    assert out == [2, 2] and world.log == []
