"""A rank's whole driver on fake ranks (threads, numpy, streams as queues): check, timings, rows, and a
rank whose block is wrong named in the row that ends the job."""

import pytest

from gemmlab.multigpu import rows as dist_rows
from gemmlab.multigpu.rank import FAULT_ENV, Item, Job, Rank
from gemmlab.multigpu.schedule import catalog
from gemmlab.results.model import Shape
from dist_fakes import FakeComm, FakeRuntime, numpy_gemm, run_ranks


class Device:
    name, sms = "Fake GPU", 132

    def peak(self, dtype):
        return 1e12


class Ear:
    def __init__(self):
        self.phases, self.rows = [], []

    def phase(self, text):
        self.phases.append(text)

    def row(self, r):
        self.rows.append(r)


def drive(items, ranks, shape=Shape(48, 60, 40), measure=False, copy_engines=False, timeline=False, rts=None):
    """Each rank's rows and ears; `rts`, a list, gets each rank's runtime."""
    job = Job(shape, "bf16", 3, items, catalog(), params={"BM": 128}, reps=4, warmup=1, measure=measure,
              min_time_ms=0, flush_bytes=4096, timeline=timeline)
    ears = [Ear() for _ in range(ranks)]

    def body(world, rank):
        rt = FakeRuntime("comm")
        if rts is not None:
            rts.append(rt)
        gemm = numpy_gemm(rt, "bf16")
        comm = FakeComm(world, rank, rt)
        comm.copy_engines = copy_engines
        return Rank(rank, ranks, job, rt, comm, Device(), lambda name, sms: gemm, ears[rank]).run()
    out, _ = run_ranks(ranks, body)
    return out, ears


def test_rows_of_a_schedule_and_its_baseline():
    items = [Item("ring", "mine", True, "ours"), Item("allgather", "cuBLAS", False, "baseline")]
    out, ears = drive(items, 2)
    assert out[1] == [] and ears[1].rows == []  # only rank 0 makes rows
    ring, base = out[0]
    assert ring["status"] == base["status"] == "PASS" and ring["overlap"] and not base["overlap"]
    assert ring["ms"] == 1.0 and ring["compute_ms"] == 1.0 and ring["exposed_ms"] == 0.0 and ring["reps"] >= 4
    assert ring["params"] == {"BM": 128} and base["params"] == {} and ring["gpus"] == 2 and ring["grid"] == "1x2"
    assert ring["sent_mb"] == 24 * 40 * 2 / 1e6 and ring["tflops"] == pytest.approx(2 * 48 * 60 * 40 / 1e-3 / 1e12)
    dist_rows.finish(out[0])
    assert ring["x_baseline"] == 1.0 and base["x_baseline"] is None
    assert "ring with mine: check" in ears[1].phases and "ring with mine: time" in ears[1].phases


def test_a_wrong_block_ends_the_job_naming_its_rank(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "1:wrong")
    items = [Item("ring", "mine", True, "ours"), Item("allgather", "cuBLAS", False, "baseline")]
    out, ears = drive(items, 3)
    (row,) = out[0]  # the job stopped: the baseline never ran
    assert row["status"] == "FAIL" and row["bad_ranks"] == [1] and row["ms"] is None
    assert row["check"].startswith("rank 1: 1 element out of bound")
    assert not any("time" in p for p in ears[2].phases)


def test_the_bandwidth_rows(monkeypatch):
    from gemmlab.multigpu import bandwidth
    monkeypatch.setattr(bandwidth, "SIZES_MB", (1, 2))
    out, _ = drive([], 3, measure=True)
    ops = {(r["op"], r["mb_per_rank"]) for r in out[0]}
    assert ops == {(op, mb) for op in ("all-gather", "send/recv") for mb in (1, 2)}
    ag, sr = (next(r for r in out[0] if r["op"] == op and r["mb_per_rank"] == 2) for op in ("all-gather", "send/recv"))
    assert ag["busbw_gbs"] == pytest.approx(2 * 2 * 2**20 / 1e-3 / 1e9)  # (P - 1) x S per ms
    assert sr["busbw_gbs"] == pytest.approx(2 * 2**20 / 1e-3 / 1e9)  # S per ms


def test_the_copy_engine_rows_where_nccl4py_is_there(monkeypatch):
    from gemmlab.multigpu import bandwidth
    monkeypatch.setattr(bandwidth, "SIZES_MB", (1, 2))
    monkeypatch.setattr(bandwidth, "BESIDE_MB", 2)
    out, _ = drive([], 2, measure=True, copy_engines=True)
    ops = [(r["op"], r["mb_per_rank"]) for r in out[0]]
    assert ops == [("all-gather", 1), ("send/recv", 1), ("all-gather (copy engines)", 1),
                   ("all-gather", 2), ("all-gather beside a full GPU", 2), ("send/recv", 2),
                   ("all-gather (copy engines)", 2), ("all-gather (copy engines) beside a full GPU", 2)]
    beside = out[0][-1]
    assert beside["hog_ms"] == bandwidth.HOG_MS and beside["busbw_gbs"] == pytest.approx(2 * 2**20 / 1e-3 / 1e9)


@pytest.mark.parametrize("name,chunks,barrier", [("allgather_pulls", 4, True), ("allgather_arrival", 1, False)])
def test_a_timeline_per_rank_one_entry_per_chunk_in_stream_order(name, chunks, barrier):
    """--timeline: each rank's medians from the repetition's start on the comm stream; the barrier (pulls
    only), then each chunk, in the order the comm stream ran them; the GEMM from its launch to its end. The
    baseline (no arrival step) has none."""
    items = [Item(name, "mine", True, "ours"), Item("allgather", "cuBLAS", False, "baseline")]
    out, _ = drive(items, 3, timeline=True)
    row, base = out[0]
    assert row["status"] == "PASS" and "timeline" not in base
    assert [t["rank"] for t in row["timeline"]] == [0, 1, 2]
    for t in row["timeline"]:
        assert len(t["chunks_ms"]) == chunks
        comm = ([t["barrier_ms"]] if barrier else []) + t["chunks_ms"]
        assert (t["barrier_ms"] is not None) == barrier and comm == sorted(comm) and comm[0] > 0
        assert t["gemm_end_ms"] > t["gemm_start_ms"]


def test_without_a_timeline_no_event_is_added():
    """Recording events can move a repetition's time: without --timeline the run records none with timing,
    and exactly the events it records with it, less the timeline's."""
    items = [Item("allgather_pulls", "mine", True, "ours")]
    plain, marked = [], []
    drive(items, 2, rts=plain)
    drive(items, 2, timeline=True, rts=marked)
    for without, with_ in zip(plain, marked):
        assert not any(e.timing for e in without.events)
        stamps = sum(e.timing for e in with_.events)
        assert stamps == (1 + 4) * (1 + 1 + 4 + 2)  # warm-up and timed repetitions: start, barrier, 4 chunks, GEMM
        assert len(without.events) == len(with_.events) - stamps


def test_the_timeline_is_the_median_of_each_event_over_the_repetitions():
    nan = float("nan")
    # 2 ranks x 3 repetitions x (barrier, chunk 0, chunk 1, GEMM start, GEMM end)
    every = [[nan, 1, 2, 0, 5] + [nan, 3, 4, 0, 7] + [nan, 2, 9, 1, 6],
             [nan, 1, 1, 0, 1] * 3]
    got = dist_rows.timeline_of(every, 3)
    assert got == [{"rank": 0, "barrier_ms": None, "chunks_ms": [2.0, 4.0], "gemm_start_ms": 0.0, "gemm_end_ms": 6.0},
                   {"rank": 1, "barrier_ms": None, "chunks_ms": [1.0, 1.0], "gemm_start_ms": 0.0, "gemm_end_ms": 1.0}]
