"""Rank, world size and local rank from each launcher's environment (fake ranks), and the NCCL id passed
through a file store."""

import threading

import pytest

from gemmlab.multigpu.launcher import FileStore, Place, from_env, job_id, share_id
from gemmlab.errors import GemmlabError


@pytest.mark.parametrize("env,place", [
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "3"}, Place(3, 8, 3, "mpirun")),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1"}, Place(5, 16, 1, "srun")),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, Place(1, 2, 1, "torchrun")),
    ({"PMI_RANK": "2", "PMI_SIZE": "4"}, Place(2, 4, 2, "mpich")),
    ({"PMI_RANK": "6", "PMI_SIZE": "8", "MPI_LOCALRANKID": "2"}, Place(6, 8, 2, "mpich")),
    ({}, Place(0, 1, 0, "none")),
    ({"RANK": "0"}, Place(0, 1, 0, "none")),  # a RANK alone is not a launcher
])
def test_each_launcher(env, place):
    assert from_env(env) == place


def test_mpirun_under_slurm_is_read_as_mpirun():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
    assert from_env(env) == Place(2, 4, 0, "mpirun")


@pytest.mark.parametrize("env,message", [
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' \\(set by torchrun\\) is not a number"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "torchrun says rank 2 of 2: not a rank of the job"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "-1"}, "srun says local rank -1"),
])
def test_nonsense_from_a_launcher(env, message):
    with pytest.raises(GemmlabError, match=message):
        from_env(env)


def test_the_id_through_a_file_store(tmp_path):
    path, got = tmp_path / "id", {}

    def rank(r):
        got[r] = share_id(Place(r, 3, r, "srun"), lambda: b"\x00\x01secret", str(path), timeout=10, env={})
    threads = [threading.Thread(target=rank, args=(r,)) for r in (2, 1, 0)]  # the others start first
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert got == {0: b"\x00\x01secret", 1: b"\x00\x01secret", 2: b"\x00\x01secret"}


def test_an_id_left_by_another_job_is_not_taken(tmp_path):
    path = tmp_path / "id"
    FileStore(path, "job1").share(0, lambda: b"old", 1)
    with pytest.raises(GemmlabError, match="rank 1 waited 0.2 s for rank 0 to write the NCCL id"):
        FileStore(path, "job2").share(1, lambda: b"", 0.2)
    assert FileStore(path, "job1").share(1, lambda: b"", 1) == b"old"
    assert job_id({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}) != job_id({"SLURM_JOB_ID": "8", "SLURM_STEP_ID": "0"})


def test_one_rank_makes_its_own_id():
    assert share_id(Place(0, 1, 0, "none"), lambda: b"mine") == b"mine"


def test_no_way_to_pass_the_id_says_what_would_do():
    with pytest.raises(GemmlabError, match="no way to pass the NCCL id") as e:
        share_id(Place(1, 2, 1, "srun"), lambda: b"", env={"SLURM_PROCID": "1"})
    assert "--store PATH" in e.value.hint
