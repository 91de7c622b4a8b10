"""The job's processes on a CPU, with stand-in ranks (tests/dist_ranks.py): rows handed on as they come,
and a rank that crashes, hangs or fails stops the whole job with a message naming it, no process left."""

import os
import re
import time

import pytest

from gemmlab.multigpu import job as dist_job
from gemmlab.multigpu.rank import Item, Job
from gemmlab.multigpu.schedule import get
from gemmlab.present.progress import Reporter
from gemmlab.results.model import Shape


@pytest.fixture
def fake_ranks(monkeypatch):
    monkeypatch.setenv(dist_job.RANK_MAIN_ENV, "dist_ranks:main")

    def scenario(text):
        monkeypatch.setenv("DIST_SCENARIO", text)
    return scenario


def a_job():
    return Job(Shape(96, 96, 96), "bf16", 7, [Item("ring", "cuBLAS", True, "ours")], {"ring": get("ring")})


def run(gpus=2, timeout=20.0, **kw):
    return dist_job.run(a_job(), gpus, Reporter(), timeout=timeout, single=False, make_id=lambda: b"the-id", env={},
                        **kw)


def children():
    import multiprocessing
    return [p for p in multiprocessing.active_children() if p.is_alive()]


def test_rows_and_metadata_come_from_rank_0(fake_ranks, tmp_path):
    fake_ranks("fine")
    doc, rows, rank = run(gpus=3, out_path=tmp_path / "out.json")
    assert rank == 0 and "fault" not in doc
    assert doc["gpus"] == 3 and doc["device"]["name"] == "Fake GPU" and doc["uid"] == "the-id" and doc["seed"] == 7
    assert [r["ms"] for r in rows] == [1.0] and rows[0]["gpus"] == 3 and rows[0]["local"] == 0
    assert '"the-id"' in (tmp_path / "out.json").read_text()
    assert children() == []


@pytest.mark.parametrize("scenario,message", [
    ("crash:1", r"rank 1 crashed \(exit code 3\) during 'ring with mine: check'; the job was stopped"),
    ("error:1", r"rank 1: no room for the inputs \(choose a smaller shape\)"),
    ("fault:0", r"rank 0 crashed during 'ring with mine: check': CUDARuntimeError: cudaErrorIllegalAddress"),
])
def test_a_rank_that_fails_stops_the_job_and_is_named(fake_ranks, scenario, message):
    import re
    fake_ranks(scenario)
    t0 = time.monotonic()
    doc, rows, _ = run()
    assert re.search(message, doc["fault"]), doc["fault"]
    assert time.monotonic() - t0 < 15 and children() == []


def test_a_hung_rank_is_the_one_behind(fake_ranks):
    fake_ranks("hang:1")
    t0 = time.monotonic()
    doc, rows, _ = run(gpus=3, timeout=3)
    assert doc["fault"].startswith("rank 1 made no progress for 3 s (last: 'ring with mine: check'); "
                                   "ranks 0, 2 waited for it at 'ring with mine: time'")
    assert [r["ms"] for r in rows] == [1.0]  # what was measured before is kept
    assert time.monotonic() - t0 < 10 and children() == []


def test_under_a_launcher_this_process_is_one_rank(fake_ranks, tmp_path):
    fake_ranks("fine")
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
    doc, rows, rank = dist_job.run(a_job(), 1, Reporter(), single=False, make_id=lambda: b"x", env=env)
    assert rank == 0 and rows and doc["gpus"] == 1 and doc["launcher"] == "gemmlab"  # one rank: as --gpus 1
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    store = tmp_path / "id"
    store.write_bytes(dist_job_id(env) + b"\nfrom-rank-0")
    doc, rows, rank = dist_job.run(a_job(), None, Reporter(), single=False, make_id=lambda: b"x", env=env,
                                   store=str(store))
    assert rank == 1 and rows == [] and "fault" not in doc  # rank 1's process: no rows, nothing wrong


@pytest.mark.parametrize("visible,gpu", [("5", 0), ("4,5,6,7", 3), (None, 3)])
def test_a_rank_takes_the_gpu_the_launcher_shows_it(fake_ranks, tmp_path, visible, gpu):
    """Local rank 3: its GPU is the 4th it sees, unless the launcher showed it one GPU alone (srun's
    --gpus-per-task sets CUDA_VISIBLE_DEVICES to that one), which is then GPU 0 to it."""
    fake_ranks("fine")
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "3"} | ({"CUDA_VISIBLE_DEVICES": visible} if visible else {})
    doc, rows, rank = dist_job.run(a_job(), None, Reporter(), single=False, make_id=lambda: b"x", env=env,
                                   store=str(tmp_path / "id"))
    assert rank == 0 and doc["device"]["index"] == gpu


def dist_job_id(env):
    from gemmlab.multigpu.launcher import job_id
    return job_id(env).encode()


def test_gpus_against_the_launcher():
    from gemmlab.errors import GemmlabError
    env = {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0"}
    with pytest.raises(GemmlabError, match="--gpus 2 under torchrun, which started 4 ranks"):
        dist_job.run(a_job(), 2, Reporter(), env=env)


def test_a_shape_the_split_cannot_take_fails_before_any_process(fake_ranks):
    from gemmlab.errors import GemmlabError
    job = a_job()
    job.shape = Shape(63, 96, 96)
    with pytest.raises(GemmlabError, match="ring splits M = 63 over 2 parts"):
        dist_job.run(job, 2, Reporter(), single=False, make_id=lambda: b"x", env={})
    assert children() == []


def test_the_copy_engine_schedule_without_nccl4py_is_one_clear_refusal(monkeypatch):
    """No nccl4py: the schedule is refused before any rank starts, and `all` leaves it out."""
    import gemmlab
    from gemmlab import api
    from gemmlab.errors import GemmlabError
    from gemmlab.multigpu import comm
    monkeypatch.setattr(comm, "copy_engines_missing", lambda: "nccl4py is not importable (ImportError: no nccl)")
    monkeypatch.setattr(dist_job, "Ranks", None)  # starting a rank would fail loudly
    with pytest.raises(GemmlabError, match=r"allgather_ce moves data with NCCL's copy engines, through nccl4py: "
                                           r"nccl4py is not importable \(ImportError: no nccl\)") as e:
        gemmlab.dist("allgather_ce", "wgmma_ws", shape=(1024, 2048, 1024), dtype="bf16", gpus=2, progress=False)
    assert 'pip install "gemmlab[dist]"' in e.value.hint
    from gemmlab.multigpu.schedule import catalog
    names = api._schedule_names("all", catalog(), lambda: 4)
    assert "allgather_ce" not in names and {"ring", "summa"} <= set(names)
    monkeypatch.setattr(comm, "copy_engines_missing", lambda: None)
    assert "allgather_ce" in api._schedule_names("all", catalog(), lambda: 2)


def test_pulls_on_an_older_nccl_are_one_clear_refusal(monkeypatch):
    """NCCL before 2.29.2 has no ncclGetPeerDevicePointer: allgather_pulls is refused before any rank starts
    (on one GPU it has nothing to move, and runs), and `all` leaves it out; it needs nccl4py's peer-address
    getter too."""
    import gemmlab
    from gemmlab import api
    from gemmlab.errors import GemmlabError
    from gemmlab.multigpu import comm
    from gemmlab.multigpu.schedule import catalog

    class Old:
        @staticmethod
        def get_version():
            return 22809
    monkeypatch.setattr(comm, "copy_engines_missing", lambda: None)
    monkeypatch.setattr(comm, "nccl", lambda: Old)
    monkeypatch.setattr(dist_job, "Ranks", None)
    why = "this process loaded NCCL 2.28.9, which has no ncclGetPeerDevicePointer (2.29.2 and later)"
    with pytest.raises(GemmlabError, match=re.escape(f'allgather_pulls moves rows with transport = "pulls": {why}')) as e:
        gemmlab.dist("allgather_pulls", "wgmma_ws", shape=(1024, 2048, 1024), dtype="bf16", gpus=2, progress=False)
    assert "nvidia-nccl-cu13>=2.29.2" in e.value.hint
    names = api._schedule_names("all", catalog(), lambda: 2)
    assert "allgather_pulls" not in names and "allgather_arrival" in names
    Old.get_version = staticmethod(lambda: 22900)  # the barrier's signals, but no peer addresses yet
    assert comm.transport_missing("pulls") == "this process loaded NCCL 2.29.0, which has no " \
                                              "ncclGetPeerDevicePointer (2.29.2 and later)"
    Old.get_version = staticmethod(lambda: 23007)
    monkeypatch.setattr(comm, "_peer_pointers_missing", lambda: "no get_peer_device_pointer")
    assert comm.transport_missing("pulls") == "no get_peer_device_pointer"
    monkeypatch.setattr(comm, "_peer_pointers_missing", lambda: None)
    assert comm.transport_missing("pulls") is None and "allgather_pulls" in api._schedule_names("all", catalog(),
                                                                                                lambda: 2)


@pytest.mark.parametrize("env,hosts", [
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}, 2),
    ({"RANK": "0", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "0"}, 2),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_NNODES": "4"}, 4),
    ({"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "4"}, 1),
])
def test_waiting_for_copy_engine_rows_is_refused_across_hosts(env, hosts):
    """allgather_arrival's GEMM waits for rows the copy engines bring; across hosts NCCL would move them on
    its kernels, which need SMs the waiting GEMM holds: refused before any rank starts, where the launcher
    says the job spans several hosts."""
    from gemmlab.errors import GemmlabError
    from gemmlab.multigpu.launcher import from_env
    from gemmlab.multigpu.schedule import get
    assert from_env(env).hosts == hosts
    job = Job(Shape(96, 96, 96), "bf16", 7, [Item("allgather_arrival", "wgmma_ws", True, "ours")],
              {"allgather_arrival": get("allgather_arrival")})
    if hosts == 1:
        return
    with pytest.raises(GemmlabError, match=f"allgather_arrival waits for rows that NCCL's copy engines bring, within "
                                           f"one host; .* spread this job over {hosts} hosts"):
        dist_job.run(job, None, Reporter(), env=env)


class Buf:
    """What pull_all reads of a cupy array: its address, its size, its contiguity."""

    def __init__(self, ptr, nbytes):
        self.nbytes = nbytes
        self.data = type("Mem", (), {"ptr": ptr})()
        self.flags = type("Flags", (), {"c_contiguous": True})()


class Window:
    """nccl4py's RegisteredWindowHandle: each peer's copy of the window mapped at its own base here."""

    def __init__(self, bases):
        self.bases, self.asked = bases, []

    def get_peer_device_pointer(self, peer, offset=0):
        self.asked.append((peer, offset))
        return None if self.bases[peer] is None else self.bases[peer] + offset


def pulling_comm(bases, rank=1):
    from gemmlab.multigpu.comm import CopyEngineNccl
    c = CopyEngineNccl.__new__(CopyEngineNccl)  # no NCCL: only the window bookkeeping pull_all uses
    c.world, c.rank, c._pulls = len(bases), rank, {}
    window = Window(bases)
    c.windows = [(Window([0] * len(bases)), Buf(0x9000, 64)), (window, Buf(0x10000, 4096))]
    return c, window


def test_pull_all_is_one_batch_of_copies_from_the_peers_addresses_of_the_same_place(monkeypatch):
    """Rank 1 of 3 pulls two pieces (from ranks 0 and 2) at offsets 256 and 768 of its second window: one
    cuMemcpyBatchAsync a call, in stream order, preferring the copy engines, from NCCL's addresses of the
    same offsets in those ranks' windows; the addresses asked once, not every repetition."""
    from cuda.bindings import driver as drv
    from gemmlab.gpu import driver as gpu_driver
    calls = []
    monkeypatch.setattr(drv, "cuMemcpyBatchAsync", lambda *a: calls.append(a) or (drv.CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(gpu_driver, "bindings", lambda: drv)
    monkeypatch.delenv("GEMMLAB_PULLS_COPY", raising=False)
    c, window = pulling_comm([0xA00000, 0xB00000, 0xC00000])
    recvs = [(Buf(0x10000 + 256, 128), 0), (Buf(0x10000 + 768, 128), 2)]
    stream = type("Stream", (), {"ptr": 0x77})()
    for _ in range(3):
        c.pull_all(recvs, stream)
    assert len(calls) == 3 and window.asked == [(0, 256), (2, 768)]
    dsts, srcs, sizes, count, attrs, idxs, nattrs, s = calls[0]
    assert [int(d) for d in dsts] == [0x10000 + 256, 0x10000 + 768]
    assert [int(x) for x in srcs] == [0xA00000 + 256, 0xC00000 + 768] and sizes == [128, 128] and count == 2
    assert idxs == [0] and nattrs == 1 and int(s) == 0x77
    assert attrs[0].srcAccessOrder == drv.CUmemcpySrcAccessOrder.CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
    assert attrs[0].flags == drv.CUmemcpyFlags.CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE
    c.pull_all([], stream)
    assert len(calls) == 3


def test_pull_all_one_copy_each_where_asked(monkeypatch):
    from gemmlab.multigpu import comm
    copies = []

    class Runtime:
        memcpyDefault = 4

        @staticmethod
        def memcpyAsync(dst, src, n, kind, stream):
            copies.append((dst, src, n, kind, stream))
    cupy = type("cupy", (), {"cuda": type("cuda", (), {"runtime": Runtime})})
    monkeypatch.setattr(comm, "cuda", lambda: cupy)
    monkeypatch.setenv("GEMMLAB_PULLS_COPY", "each")
    c, _ = pulling_comm([0xA00000, 0xB00000])
    c.pull_all([(Buf(0x10000 + 64, 32), 0)], type("Stream", (), {"ptr": 5})())
    assert copies == [(0x10000 + 64, 0xA00000 + 64, 32, 4, 5)]


def test_a_peer_nccl_cannot_reach_is_named(monkeypatch):
    from gemmlab.errors import GemmlabError
    monkeypatch.setenv("GEMMLAB_PULLS_COPY", "each")
    c, _ = pulling_comm([None, 0xB00000])
    with pytest.raises(GemmlabError, match="NCCL cannot reach rank 0's window from rank 1"):
        c.pull_all([(Buf(0x10000, 32), 0)], None)
