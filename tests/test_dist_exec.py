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
        [("allgather_ce", n) for n in (1, 2, 3, 4, 5)] + [("allgather_arrival", n) for n in (1, 2, 3, 5)] + \
        [("allgather_pulls", n) for n in (1, 3, 5)]


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
        same = all(np.array_equal(x, run.C, equal_nan=True) for x in snapshots)  # NaN where a wrong C has them
        assert same, "a repetition's C differs from the last one's"
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


def arriving(tmp_path, chunks, name="allgather_arrival"):
    """allgather_arrival.toml (or `name`'s file) with `chunks` chunks."""
    text = open(sch.get(name).path).read()
    text = text.replace(f'name = "{name}"', 'name = "arriving"')
    text = "\n".join(f"chunks = {chunks}" if line.startswith("chunks =") else line for line in text.splitlines())
    (tmp_path / "arriving.toml").write_text(text)
    s = sch.get("arriving", (tmp_path,))
    assert s.arrival and s.steps[0].chunks == chunks
    return s


@pytest.mark.parametrize("ranks,chunks", [(1, 2), (2, 1), (2, 2), (3, 3), (4, 2), (5, 1)])
@pytest.mark.parametrize("policy", ["compute", "comm"])
def test_one_launch_waits_for_each_chunk_s_flag(tmp_path, ranks, chunks, policy):
    """The stand-in kernel (dist_fakes.numpy_gemm) does what kernels/lib/arrival.j2 does: its own rows at
    once, then each chunk's after that chunk's flag holds the launch's epoch. Repetitions queued back to back,
    the compute stream run as far ahead as it may: a flag raised before its chunk lands, or one left from
    an earlier repetition, would let it read poisoned rows."""
    shape = Shape(ranks * chunks * 4, 60, 48)
    C, plans, world = run_schedule(arriving(tmp_path, chunks), ranks, shape, policy, repeat=3, sync=False)
    verdict, bad = Reference(np, 5, shape.M, shape.N, shape.K, "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed and bad == [], verdict.summary()
    assert [op for _, op, _ in world.log].count("allgather") == ranks * chunks * 3 * (ranks > 1)


@pytest.mark.parametrize("ranks,chunks", [(1, 2), (2, 1), (2, 4), (3, 3), (4, 2), (4, 4), (5, 2)])
@pytest.mark.parametrize("policy", ["compute", "comm"])
def test_pulls_raise_each_chunk_s_flag_after_its_rows(tmp_path, ranks, chunks, policy):
    """allgather_pulls: one barrier a repetition, then each chunk as one batch of copies out of the other
    ranks' windows (the flag follows this rank's copies). Repetitions back to back, the hostile orders: C
    right, one pull per chunk per rank and repetition moving the bytes the schedule's arithmetic says, one
    barrier a repetition, no all-gather."""
    shape = Shape(ranks * chunks * 4, 60, 48)
    C, plans, world = run_schedule(arriving(tmp_path, chunks, "allgather_pulls"), ranks, shape, policy,
                                   repeat=3, sync=False)
    verdict, bad = Reference(np, 5, shape.M, shape.N, shape.K, "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert verdict.passed and bad == [], verdict.summary()
    ops = [o for _, o, _ in world.log]
    moved = [n for _, o, n in world.log if o == "pull"]
    assert len(moved) == ranks * chunks * 3 * (ranks > 1) and "allgather" not in ops
    assert sum(moved) == 3 * sum(p.sent for p in plans)  # what a rank pulls is what the others would send
    assert ops.count("barrier") == ranks * 3 * (ranks > 1)


def in_turn(sched, shape, ready=None):
    """Two ranks, rank 0's repetition run to its end before rank 1 starts its own (so a rank that waits for
    the other would hang: only a schedule missing a wait gets through); `ready(world, rank)` first. C."""
    plans = [sch.rank_plan(sched, shape, 2, r, "bf16") for r in range(2)]

    def body(world, rank):
        rt = FakeRuntime("compute")
        run = RankRun(sched, plans[rank], shape, "bf16", 5, rt, FakeComm(world, rank, rt), numpy_gemm(rt, "bf16"))
        run.poison()
        after = ready(world, rank) if ready else None
        for turn in range(2):
            world.barrier.wait()
            if turn == rank:
                if after:
                    after()
                run.once()
                rt.synchronize()
        world.barrier.wait()
        return gather(run, plans, shape, run.comm, rt)
    (C, _), _ = run_ranks(2, body)
    return C, Reference(np, 5, shape.M, shape.N, shape.K, "bf16").check(np, C, [(p.rank, p.C) for p in plans])


def flag_first(run, launch, moves, arrival, transport="allgather"):
    """_arrive_beside for pulls with each chunk's flag raised before its copies are queued."""
    arrival.epoch += 1
    run.comm.barrier(run.rt.comm)
    for c, recvs in enumerate(moves):
        run.rt.write_value(run.rt.comm, arrival.flags, c, arrival.epoch)
        run.comm.pull_all(recvs, run.rt.comm)
    run._on_compute(launch)


def test_a_flag_raised_before_its_pulls_lets_the_gemm_read_poison(tmp_path, monkeypatch):
    """The flag of a chunk must follow that chunk's copies in the comm stream (cuMemcpyBatchAsync in stream
    order): raised first, the compute stream run ahead reads the poisoned rows, on every rank."""
    monkeypatch.setattr(RankRun, "_arrive_beside", flag_first)
    shape = Shape(2 * 2 * 4, 60, 48)
    C, plans, world = run_schedule(arriving(tmp_path, 2, "allgather_pulls"), 2, shape, repeat=1)
    verdict, bad = Reference(np, 5, shape.M, shape.N, shape.K, "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert not verdict.passed and bad == [0, 1]


def test_without_the_barrier_a_pull_reads_rows_not_yet_made(tmp_path, monkeypatch):
    """On a GPU a rank's own rows reach its window by a copy queued on its compute stream: a rank that pulls
    before another has run that copy brings what was there. Here rank 1's rows are NaN until its turn, and
    rank 0 runs first with no barrier: rank 0's C is wrong. (With the barrier rank 0 would wait for rank 1.)"""
    monkeypatch.setattr(FakeComm, "barrier", lambda comm, stream: None)

    def ready(world, rank):
        gathered = world.windows[rank][0]
        mine = gathered.copy()
        if rank == 1:
            gathered.fill(0x7FC0)  # bfloat16 NaN: rank 1's own rows not made yet
        return lambda: gathered.__setitem__(..., mine)
    _, (verdict, bad) = in_turn(arriving(tmp_path, 2, "allgather_pulls"), Shape(2 * 2 * 4, 60, 48), ready)
    assert not verdict.passed and bad == [0]


def stale(run, launch, moves, arrival, transport="allgather"):
    """_arrive_beside without a new epoch: the flags still hold the last repetition's (or compute_only's)."""
    for c, (send, whole) in enumerate(moves):
        run.comm.allgather(send, whole, run.rt.comm)
        run.rt.write_value(run.rt.comm, arrival.flags, c, arrival.epoch)
    run._on_compute(launch)


def early(run, launch, moves, arrival, transport="allgather"):
    """_arrive_beside with each flag raised before its chunk's all-gather."""
    arrival.epoch += 1
    for c, (send, whole) in enumerate(moves):
        run.rt.write_value(run.rt.comm, arrival.flags, c, arrival.epoch)
        run.comm.allgather(send, whole, run.rt.comm)
    run._on_compute(launch)


@pytest.mark.parametrize("planted", [stale, early])
def test_a_stale_or_early_flag_lets_the_gemm_read_rows_not_there(tmp_path, monkeypatch, planted):
    """The hostile order catches the two ways the flags can lie: C is wrong (NaN from the poisoned rows)."""
    monkeypatch.setattr(RankRun, "_arrive_beside", planted)
    shape = Shape(2 * 2 * 4, 60, 48)
    sched = arriving(tmp_path, 2)
    plans = [sch.rank_plan(sched, shape, 2, r, "bf16") for r in range(2)]

    def body(world, rank):
        rt = FakeRuntime("compute")
        run = RankRun(sched, plans[rank], shape, "bf16", 5, rt, FakeComm(world, rank, rt), numpy_gemm(rt, "bf16"))
        run.compute_only()  # as a rank does before its check: the flags hold epoch 1
        rt.synchronize()
        run.poison()
        run.once()
        rt.synchronize()
        return gather(run, plans, shape, run.comm, rt)
    (C, _), _ = run_ranks(2, body)
    verdict, bad = Reference(np, 5, shape.M, shape.N, shape.K, "bf16").check(np, C, [(p.rank, p.C) for p in plans])
    assert not verdict.passed and bad == [0, 1]


def test_compute_only_raises_the_flags_itself(tmp_path):
    """The GEMM alone: no all-gather comes, so the compute stream raises every flag before the launch (without
    that the stand-in kernel would wait for ever: the streams' deadlock check fires)."""
    shape = Shape(3 * 2 * 4, 60, 48)
    sched = arriving(tmp_path, 2)
    plans = [sch.rank_plan(sched, shape, 3, r, "bf16") for r in range(3)]

    def body(world, rank):
        rt = FakeRuntime()
        run = RankRun(sched, plans[rank], shape, "bf16", 5, rt, FakeComm(world, rank, rt), numpy_gemm(rt, "bf16"))
        flags = []
        rt.write_value = lambda stream, f, i, v: (flags.append(f), FakeRuntime.write_value(rt, stream, f, i, v))
        for _ in range(2):
            run.compute_only()
            rt.synchronize()
        return len(run.gemms), [int(x) for x in flags[0]]
    out, world = run_ranks(3, body)
    assert out == [(1, [2, 2])] * 3 and [op for _, op, _ in world.log] == ["symmetric"] * 3


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
                                       ("allgather_ce", 3), ("allgather_arrival", 3)])
def test_bytes_sent_are_the_arithmetics(name, ranks):
    shape = Shape(36, 60, 48)
    _, plans, world = run_schedule(name, ranks, shape, repeat=1)
    for p in plans:
        sent = sum(b for r, op, b in world.log if r == p.rank)
        gathered = p.C.size * 4 if p.rank else 0  # the check's gather of C to rank 0 is not the schedule's
        assert sent - gathered == p.sent


@pytest.mark.parametrize("name,ranks", [("ring", 4), ("summa", 4), ("allgather_ce", 3), ("allgather_arrival", 3)])
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
