"""sweep, compare and suite under a launcher (gemmlab/spread.py) on a CPU: fake ranks are `gemmlab`
processes with mpirun's environment variables, the stand-in worker of tests/gpus_fake.py (it logs the GPU
it was given), and the --store file in tmp_path. Each rank measures its share; rank 0 merges and writes."""

import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import GOOD_BODY, write_template
from gemmlab.errors import GemmlabError
from gemmlab.multigpu.launcher import FileStore, MpiChannel, Place
from gemmlab.spread import Team, refuse_gpus

TESTS = Path(__file__).resolve().parent


def ranks(tmp_path, world, *args, only=None, timeout=60):
    """Start ranks `only` (default: all) of a `world`-rank job, each `gemmlab *args` with its own --out
    and history; wait for them. {rank: (exit status, stdout, stderr)}."""
    procs = {}
    for r in (range(world) if only is None else only):
        env = dict(os.environ, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(world),
                   OMPI_COMM_WORLD_LOCAL_RANK=str(r), GEMMLAB_GPU_JOBS="gpus_fake:SeenGpu",
                   SEEN_GPU_LOG=str(tmp_path / "seen.log"), GEMMLAB_HISTORY=str(tmp_path / f"history{r}.db"),
                   PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]), COLUMNS="300")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        argv = [sys.executable, "-m", "gemmlab", *map(str, args), "--store", tmp_path / "store",
                "--out", tmp_path / f"out{r}.json"]
        procs[r] = subprocess.Popen([str(a) for a in argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
    return {r: (p.wait(timeout), p.stdout.read(), p.stderr.read()) for r, p in procs.items()}


def history_rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as con:
        return con.execute("SELECT variant, params FROM runs").fetchall()


@pytest.fixture
def swept(tmp_path):
    """Templates the stand-in times at 64 / TILE ms (the sweep's order is known), and one it crashes."""
    d = tmp_path / "kernels"
    d.mkdir()
    path = write_template(d, "swept", GOOD_BODY)
    path.write_text(path.read_text().replace("choices = [8, 16]", "choices = [1, 2, 4, 8, 16]"))
    write_template(d, "oob", GOOD_BODY)
    return d


def test_a_sweep_over_three_ranks(tmp_path, swept):
    got = ranks(tmp_path, 3, "sweep", "--variant", "swept", "--param", "TILE=1,2,4,8,16", "--size", 64,
                "--kernels-dir", swept)
    for r, (status, stdout, stderr) in got.items():
        assert status == 0, (r, stdout, stderr)
    assert "over 3 ranks (mpirun)" in got[0][1] and got[1][1] == got[2][1] == ""  # only rank 0 prints
    assert not (tmp_path / "out1.json").exists() and not (tmp_path / "out2.json").exists()
    doc = json.loads((tmp_path / "out0.json").read_text())
    assert doc["ranks"] == 3 and doc["launcher"] == "mpirun" and "fault" not in doc
    kernels = [x for x in doc["rows"] if x["variant"] == "swept"]
    assert [x["params"]["TILE"] for x in kernels] == [16, 8, 4, 2, 1]  # fastest first, whichever rank
    # round-robin by index: rank r took every third configuration from the r-th on
    assert {x["params"]["TILE"]: x["rank"] for x in kernels} == {1: 0, 2: 1, 4: 2, 8: 0, 16: 1}
    assert [(x["variant"], x["rank"]) for x in doc["rows"][5:]] == [("cuBLAS", 0), ("cuBLAS", 1), ("cuBLAS", 2)]
    assert all(x["host"] for x in doc["rows"]) and [b["rows"] for b in doc["by_rank"]] == [3, 3, 2]
    # each rank on its own GPU (its local rank), every job once
    seen = sorted(tuple(line.split()) for line in (tmp_path / "seen.log").read_text().splitlines())
    assert seen == sorted([("cuBLAS", "0"), ("cuBLAS", "1"), ("cuBLAS", "2")]
                          + [("swept", str(r)) for r in (0, 0, 1, 1, 2)])
    # rank 0 records every rank's rows in its history; the others record nothing
    assert len(history_rows(tmp_path / "history0.db")) == 8
    assert not (tmp_path / "history1.db").exists() and not (tmp_path / "history2.db").exists()


def test_compare_keeps_the_order_asked_and_says_which_failed(tmp_path, swept):
    got = ranks(tmp_path, 2, "compare", "--variants", "naive,oob,tiled,coalesced,blocktile1d", "--size", 64,
                "--kernels-dir", swept)
    assert got[0][0] == 1 and got[1][0] == 0, got  # oob crashed: rank 0's status is the job's
    assert "CRASHED" in got[0][2] and got[1][1] == "" and got[1][2] == ""
    doc = json.loads((tmp_path / "out0.json").read_text())
    assert [(x["variant"], x["rank"]) for x in doc["rows"]] == [
        ("naive", 0), ("oob", 1), ("tiled", 0), ("coalesced", 1), ("blocktile1d", 0), ("cuBLAS", 0), ("cuBLAS", 1)]
    assert doc["rows"][1]["status"] == "CRASHED" and doc["rows"][2]["speedup_prev"] is not None


def test_a_suite_keeps_each_shape_on_one_rank(tmp_path):
    got = ranks(tmp_path, 2, "suite", "--variants", "tiled", "--only", "256x256x8192,1x3072x3072,256x256x256")
    assert [g[0] for g in got.values()] == [0, 0], got
    assert "TB/s over 2 ranks (mpirun)" in got[0][1] and got[1][1] == ""
    doc = json.loads((tmp_path / "out0.json").read_text())
    # the suite's order (as one process gives it), each shape with its kernel and its own rank's cuBLAS
    assert [(x["shape"], x["variant"], x["rank"]) for x in doc["rows"]] == [
        ("1x3072x3072", "tiled", 0), ("1x3072x3072", "cuBLAS", 0), ("256x256x256", "tiled", 1),
        ("256x256x256", "cuBLAS", 1), ("256x256x8192", "tiled", 0), ("256x256x8192", "cuBLAS", 0)]
    assert doc["summary"] and doc["suite"]["name"] == "lab" and doc["ranks"] == 2


def test_a_rank_that_never_delivers_is_named(tmp_path):
    # rank 2 of 3 never starts: rank 0 waits its own time plus ten --timeout, then keeps what came
    got = ranks(tmp_path, 3, "compare", "--variants", "naive,tiled,coalesced", "--size", 64, "--timeout", 0.3,
                only=[0, 1])
    assert got[0][0] == 1 and "rank 2 did not deliver its rows within" in got[0][2], got[0]
    assert got[1][0] == 0
    doc = json.loads((tmp_path / "out0.json").read_text())
    assert "rank 2 did not deliver" in doc["fault"] and {x["rank"] for x in doc["rows"]} == {0, 1}


def test_gpus_under_a_launcher_is_refused(tmp_path):
    got = ranks(tmp_path, 2, "sweep", "--variant", "tiled", "--param", "TILE=8,16", "--size", 64, "--gpus", 2,
                only=[0])
    status, stdout, stderr = got[0]
    assert status == 1 and "--gpus 2 under mpirun, which started 2 ranks" in stderr and "Traceback" not in stderr
    with pytest.raises(GemmlabError, match="--gpus all under srun"):
        refuse_gpus(None, Place(0, 4, 0, "srun"))
    refuse_gpus(3, Place(0, 1, 0, "none"))  # no launcher: --gpus is this host's


@pytest.mark.parametrize("world,n", [(1, 5), (3, 7), (4, 2), (5, 5)])
def test_the_shares_cover_every_item_once(world, n):
    shares = [Team(Place(r, world, r, "mpirun"), None, 0, "", "h", 0.0).share(range(n)) for r in range(world)]
    assert sorted(i for s in shares for i in s) == list(range(n))
    assert all(s == list(range(r, n, world)) for r, s in enumerate(shares))


def test_the_gpu_a_rank_takes():
    team = Team(Place(5, 8, 1, "srun"), None, 0, "", "h", 0.0)
    assert team.gpu({}) == 1 and team.gpu({"CUDA_VISIBLE_DEVICES": "2,3"}) == 1
    assert team.gpu({"CUDA_VISIBLE_DEVICES": "3"}) == 0  # the launcher gave this rank its GPU alone


def test_the_file_store_gathers_and_names_who_is_missing(tmp_path):
    path = tmp_path / "store"
    place = [Place(r, 3, r, "srun") for r in range(3)]
    FileStore(path, "", place[1]).gather(b"one", "key", 1)
    FileStore(path, "", place[2]).gather(b"old", "another job", 1)  # a part of another job is not taken
    got = FileStore(path, "", place[0]).gather(b"zero", "key", 0.3)
    assert got == {0: b"zero", 1: b"one"} and not (tmp_path / "store.rank1").exists()


class FakeComm:
    """mpi4py's COMM_WORLD between threads: send, iprobe, recv."""
    boxes: dict = {}

    def __init__(self, rank):
        self.rank = rank

    def send(self, obj, dest, tag):
        FakeComm.boxes.setdefault((self.rank, dest, tag), queue.Queue()).put(obj)

    def iprobe(self, source, tag):
        return not FakeComm.boxes.setdefault((source, self.rank, tag), queue.Queue()).empty()

    def recv(self, source, tag):
        return FakeComm.boxes[(source, self.rank, tag)].get()


def test_the_mpi_gather_takes_each_rank_and_times_out_on_the_rest():
    FakeComm.boxes = {}
    world = 4

    def rank(r, after):  # rank 3 is done after rank 0 has begun to wait; rank 2 never
        time.sleep(after)
        MpiChannel(FakeComm(r), Place(r, world, r, "mpirun")).gather(f"rows {r}".encode(), "k", 0)
    senders = [threading.Thread(target=rank, args=(r, after)) for r, after in ((1, 0), (3, 0.5))]
    for t in senders:
        t.start()
    started = time.monotonic()
    got = MpiChannel(FakeComm(0), Place(0, world, 0, "mpirun")).gather(b"rows 0", "k", 1.5)
    assert got == {0: b"rows 0", 1: b"rows 1", 3: b"rows 3"} and time.monotonic() - started >= 1.5


def _mpi_here() -> bool:
    import shutil
    if not shutil.which("mpirun"):
        return False
    return subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True).returncode == 0


@pytest.mark.gpu
def test_a_compare_under_a_real_mpirun(tmp_path):
    """The seed and the rows through MPI itself (no --store), with stand-in workers. It needs mpirun and
    mpi4py, not a GPU, but runs with the GPU tests (-m gpu): the GPU machines have both, CI neither."""
    if not _mpi_here():
        pytest.fail("mpirun and mpi4py are missing: this test runs where the GPU tests run, which have them")
    env = dict(os.environ, GEMMLAB_GPU_JOBS="handlers:FakeGpu", GEMMLAB_HISTORY=str(tmp_path / "history.db"),
               PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               OMPI_MCA_rmaps_base_oversubscribe="1")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    r = subprocess.run(["mpirun", *root, "-n", "3", sys.executable, "-m", "gemmlab", "compare", "--variants",
                        "naive,tiled,coalesced,blocktile1d", "--size", "64", "--json"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # one document: the other ranks print nothing
    assert doc["launcher"] == "mpirun" and doc["ranks"] == 3
    assert [(x["variant"], x["rank"]) for x in doc["rows"]] == [
        ("naive", 0), ("tiled", 1), ("coalesced", 2), ("blocktile1d", 0), ("cuBLAS", 0), ("cuBLAS", 1), ("cuBLAS", 2)]
