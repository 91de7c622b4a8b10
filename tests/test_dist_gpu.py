"""On two GPUs or more (the nvidia-h100-x2 device kind): every schedule checked and timed through NCCL,
and a rank that is wrong, crashes or hangs stops the job with its name. Skipped with fewer GPUs."""

import pytest

import gemmlab
from gemmlab.multigpu.rank import FAULT_ENV

# Each test spawns a process on every GPU; under pytest-xdist they would share the GPUs with each other and
# the bandwidth test would time NCCL against another test's kernels, so one worker runs them in turn.
pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("all-gpus")]


def gpu_count() -> int:
    try:
        from gemmlab.gpu.driver import cuda
        return cuda().cuda.runtime.getDeviceCount()
    except Exception:
        return 0


two = pytest.mark.skipif(gpu_count() < 2, reason="needs 2 GPUs (the nvidia-h100-x2 device kind)")
RUN = dict(gpus=2, reps=3, seed=11, timeout=120, single=False, progress=False)


def dist(*args, **kw):
    return gemmlab.dist(*args, **dict(RUN, **kw))


@two
@pytest.mark.parametrize("schedule", ["ring", "allgather", "reduce_scatter"])
def test_each_schedule_with_wgmma_ws_and_its_baseline(schedule):
    rs = dist(schedule, "wgmma_ws", shape=(1024, 2048, 1024), dtype="bf16", comm_sms=8)
    assert rs.exit_status == 0 and not rs.meta.get("fault"), rs.meta.get("fault")
    assert [r["status"] for r in rs] == ["PASS"] * len(rs) and len(rs) == 2
    for r in rs:
        assert r["ms"] > 0 and r["compute_ms"] > 0 and r["exposed_ms"] >= 0 and r["err_bound"] < 1


@two
def test_an_fp32_rung_and_cupy_matmul():
    rs = dist("ring", "tiled", shape=(512, 512, 256), dtype="fp32")
    assert [r["status"] for r in rs] == ["PASS", "PASS"], rs.to_dicts()


def test_summa_on_one_gpu_and_the_one_gpu_rows():
    rs = dist("summa", "wgmma_ws", shape=(1024, 1024, 1024), dtype="bf16", gpus=1, single=True)
    assert [(r["schedule"], r["status"]) for r in rs] == [("summa", "PASS"), ("summa", "PASS"), ("one GPU", "PASS"),
                                                          ("one GPU", "PASS")], rs.to_dicts()
    assert rs[0]["efficiency"] > 0.3


@two
def test_a_wrong_block_fails_the_check_naming_the_rank(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "1:wrong")
    rs = dist("ring", "wgmma_ws", shape=(1024, 1024, 1024), dtype="bf16")
    assert len(rs) == 1 and rs[0]["status"] == "FAIL" and tuple(rs[0]["bad_ranks"]) == (1,) and rs.exit_status == 1  # rows are read-only: lists become tuples
    assert rs[0]["check"].startswith("rank 1: 1 element out of bound")


@two
@pytest.mark.parametrize("kind,message", [("crash", "rank 1 crashed (killed by signal 9) during 'ring with wgmma_ws: "
                                                    "the local GEMMs alone'"),
                                          ("hang", "rank 1 made no progress for 10 s (last: 'ring with wgmma_ws: the "
                                                   "local GEMMs alone'); rank 0 waited for it at 'ring with wgmma_ws: check'")])
def test_a_rank_that_crashes_or_hangs_stops_the_job(monkeypatch, kind, message):
    import multiprocessing
    monkeypatch.setenv(FAULT_ENV, f"1:{kind}")
    rs = dist("ring", "wgmma_ws", shape=(1024, 1024, 1024), dtype="bf16", timeout=10)
    assert rs.meta["fault"].startswith(message) and rs.exit_status == 1
    assert not multiprocessing.active_children()


def copy_engines() -> bool:
    from gemmlab.multigpu.comm import copy_engines_missing
    return copy_engines_missing() is None


@two
@pytest.mark.skipif(not copy_engines(), reason='needs nccl4py (pip install "gemmlab[dist]")')
@pytest.mark.parametrize("shape", [(1024, 2048, 1024), (2048, 512, 768)])
def test_the_copy_engine_all_gather_beside_the_gemms(shape):
    rs = dist("allgather_ce", "wgmma_ws", shape=shape, dtype="bf16")
    assert rs.exit_status == 0 and not rs.meta.get("fault"), rs.meta.get("fault")
    assert [(r["schedule"], r["status"]) for r in rs] == [("allgather_ce", "PASS"), ("allgather", "PASS")], rs.to_dicts()
    assert rs[0]["overlap"] and rs[0]["err_bound"] < 1


@two
@pytest.mark.skipif(not copy_engines(), reason='needs nccl4py (pip install "gemmlab[dist]")')
@pytest.mark.parametrize("shape", [(1024, 2048, 1024), (2048, 512, 768)])
def test_one_launch_that_starts_on_rows_as_they_arrive(shape):
    """allgather_arrival: the check poisons the rows the all-gather brings, so a tile that did not wait for
    its chunk's flag reads NaN and fails it; a deadlock (a flag never raised) is the timeout's fault."""
    rs = dist("allgather_arrival", "wgmma_ws", shape=shape, dtype="bf16", timeout=60)
    assert rs.exit_status == 0 and not rs.meta.get("fault"), rs.meta.get("fault")
    assert [(r["schedule"], r["status"]) for r in rs] == [("allgather_arrival", "PASS"), ("allgather", "PASS")], \
        rs.to_dicts()
    assert rs[0]["overlap"] and rs[0]["params"]["ARRIVAL"] is True  # rows are read-only: lists become tuples
    assert [list(g) for g in rs[0]["gemms"]] == [[shape[0], shape[1] // 2, shape[2]]]  # one launch, all of C's rows


def pulls() -> bool:
    from gemmlab.multigpu.comm import transport_missing
    return transport_missing("pulls") is None


@two
@pytest.mark.skipif(not pulls(), reason='needs NCCL 2.29.2 or newer and nccl4py 0.6 (ncclGetPeerDevicePointer)')
@pytest.mark.parametrize("copy", ["batch", "each"])
@pytest.mark.parametrize("shape", [(2048, 1024, 1024), (4096, 512, 768)])
def test_pulls_beside_one_launch(shape, copy, monkeypatch):
    """allgather_pulls: the same check as allgather_arrival's (the rows the pulls bring are poisoned first),
    each chunk's flag raised after this rank's copies out of the others' windows; launched repetition after
    repetition. Both ways of queueing the copies: one cuMemcpyBatchAsync a chunk, or one cudaMemcpyAsync a
    peer. A copy the driver ran on the SMs would wait behind the GEMM that waits for it: the timeout's fault."""
    monkeypatch.setenv("GEMMLAB_PULLS_COPY", copy)  # the ranks' processes inherit it
    rs = dist("allgather_pulls", "wgmma_ws", shape=shape, dtype="bf16", timeout=60)
    assert rs.exit_status == 0 and not rs.meta.get("fault"), rs.meta.get("fault")
    assert [(r["schedule"], r["status"]) for r in rs] == [("allgather_pulls", "PASS"), ("allgather", "PASS")], \
        rs.to_dicts()
    assert rs[0]["params"]["ARRIVAL"] is True and rs[0]["sent_mb"] == rs[1]["sent_mb"]


@two
@pytest.mark.skipif(not pulls(), reason='needs NCCL 2.29.2 or newer and nccl4py 0.6 (ncclGetPeerDevicePointer)')
def test_a_timeline_of_the_pulls():
    """--timeline through the real events: each rank's barrier, then its chunks in the comm stream's order,
    all after the repetition's start; the GEMM ends after it starts. The baseline has none."""
    rs = dist("allgather_pulls", "wgmma_ws", shape=(2048, 1024, 1024), dtype="bf16", timeout=60, timeline=True)
    assert rs.exit_status == 0 and not rs.meta.get("fault"), rs.meta.get("fault")
    row, base = rs.to_dicts()
    assert "timeline" not in base and [t["rank"] for t in row["timeline"]] == [0, 1]
    for t in row["timeline"]:
        comm = [t["barrier_ms"], *t["chunks_ms"]]
        assert len(t["chunks_ms"]) == 4 and comm == sorted(comm) and comm[0] >= 0
        assert t["gemm_end_ms"] > t["gemm_start_ms"] and t["gemm_end_ms"] >= t["chunks_ms"][-1]


@two
def test_nccl_bandwidth():
    rs = dist(measure=True)
    ops = {"all-gather", "send/recv"} | ({"all-gather (copy engines)", "all-gather beside a full GPU",
                                          "all-gather (copy engines) beside a full GPU"} if copy_engines() else set())
    assert {r["op"] for r in rs} == ops
    assert all(r["busbw_gbs"] > 1 for r in rs)
