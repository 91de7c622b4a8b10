"""Every schedule run end to end on a CPU: fake ranks (threads), numpy GEMMs, NCCL's semantics, and
streams run in the most hostile order their events allow. The gathered C must be the product, and each
rank must send the bytes the schedule's arithmetic says."""

import numpy as np
import pytest

from gemmlab.errors import GemmlabError
from gemmlab.multigpu import schedule as sch
from gemmlab.multigpu.execute import RankRun, gather
from gemmlab.multigpu.inputs import Reference
from gemmlab.results.model import Shape
from dist_fakes import FakeComm, FakeRuntime, numpy_gemm, run_ranks

CASES = [("allgather", n) for n in (1, 2, 3, 4)] + [("reduce_scatter", n) for n in (1, 2, 3, 4)] + \
        [("ring", n) for n in (1, 2, 3, 4, 5)] + [("summa", n) for n in (1, 4, 9)] + \
        [("allgather_ce", n) for n in (1, 2, 3, 4, 5)]


def run_schedule(name, ranks, shape, policy="compute", overlap=True, dtype="bf16", seed=5, repeat=2, sync=True):
    sched = sch.get(name) if isinstance(name, str) else name
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
    if ranks == 5:
        shape = Shape(40, 60, 48)
    C, plans, world = run_schedule(name, ranks, shape, policy)
    ref = Reference(np, 5, shape.M, shape.N, shape.K, "bf16")
    verdict, bad = ref.check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed and bad == [], verdict.summary()


def chunked(tmp_path, chunks):
    """allgather_ce.toml with its all-gather cut into `chunks`."""
    text = open(sch.get("allgather_ce").path).read().replace("chunks = 1", f"chunks = {chunks}")
    assert f"chunks = {chunks}" in text
    (tmp_path / "chunked.toml").write_text(text.replace('name = "allgather_ce"', 'name = "chunked"'))
    return sch.get("chunked", (tmp_path,))


@pytest.mark.parametrize("ranks,chunks", [(2, 2), (3, 3), (4, 2), (1, 4)])
@pytest.mark.parametrize("policy", ["compute", "comm"])
def test_the_all_gather_in_chunks_beside_the_gemms(tmp_path, ranks, chunks, policy):
    """Each chunk's GEMMs wait for that chunk only, and write their own rows of C; a second repetition's
    all-gathers wait for the first's GEMMs (queued back to back, no synchronisation between)."""
    shape = Shape(ranks * chunks * 4, 60, 48)
    sched = chunked(tmp_path, chunks)
    C, plans, world = run_schedule(sched, ranks, shape, policy, repeat=3, sync=False)
    verdict, bad = Reference(np, 5, shape.M, shape.N, shape.K, "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed and bad == [], verdict.summary()
    m = shape.M // ranks
    assert plans[0].gemms == ((m, 60 // ranks, 48),) + ((m // chunks, 60 // ranks, 48),) * (chunks * (ranks - 1))
    assert [n for _, op, n in world.log if op == "symmetric"] == [0] * ranks  # one window a rank, same order


def test_a_chunk_count_that_does_not_divide_the_block(tmp_path):
    with pytest.raises(GemmlabError, match=r"chunked splits M / P = 6 over 4 parts") as e:
        sch.rank_plan(chunked(tmp_path, 4), Shape(12, 8, 8), 2, 0)
    assert "cut into 4 chunks" in e.value.hint


@pytest.mark.parametrize("name,ranks", [("ring", 4), ("summa", 4), ("allgather_ce", 4)])
@pytest.mark.parametrize("policy", ["compute", "comm"])
def test_repetitions_queued_back_to_back(name, ranks, policy):
    """Warm-ups queue repetitions without waiting: the next one's transfers must wait for this one's GEMMs."""
    shape = Shape(36, 60, 48)
    C, plans, _ = run_schedule(name, ranks, shape, policy, repeat=3, sync=False)
    verdict, _ = Reference(np, 5, 36, 60, 48, "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed, verdict.summary()


@pytest.mark.parametrize("name,ranks", [("ring", 3), ("summa", 4), ("allgather", 2), ("reduce_scatter", 3),
                                       ("allgather_ce", 3)])
def test_bytes_sent_are_the_arithmetics(name, ranks):
    shape = Shape(36, 60, 48)
    _, plans, world = run_schedule(name, ranks, shape, repeat=1)
    for p in plans:
        sent = sum(b for r, op, b in world.log if r == p.rank)
        gathered = p.C.size * 4 if p.rank else 0  # the check's gather of C to rank 0 is not the schedule's
        assert sent - gathered == p.sent


@pytest.mark.parametrize("name,ranks", [("ring", 4), ("summa", 4), ("allgather_ce", 3)])
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
