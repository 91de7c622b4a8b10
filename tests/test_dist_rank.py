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


def drive(items, ranks, shape=Shape(48, 60, 40), measure=False, copy_engines=False):
    job = Job(shape, "bf16", 3, items, catalog(), params={"BM": 128}, reps=4, warmup=1, measure=measure,
              min_time_ms=0, flush_bytes=4096)
    ears = [Ear() for _ in range(ranks)]

    def body(world, rank):
        rt = FakeRuntime("comm")
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
