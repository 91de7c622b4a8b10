"""Who this process is in a job of several: rank, world size and local rank, read from the launcher that
started it, and the NCCL unique id passed from rank 0 to the others through that launcher.

    mpirun (Open MPI)   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
    MPICH, Intel MPI    PMI_RANK, PMI_SIZE (MPI_LOCALRANKID where there is one)
    srun (Slurm)        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
    torchrun            RANK, WORLD_SIZE, LOCAL_RANK (and MASTER_ADDR, MASTER_PORT)

The id travels by MPI broadcast where mpi4py and an MPI launcher are there, else through torch's TCP
store at MASTER_ADDR:MASTER_PORT (torchrun), else through a file that every rank can read (`--store
PATH`: one host, or a shared file system). `gemmlab dist --gpus N` starts its N ranks itself and hands
them the id directly. The same channels (`channel`) carry sweep's, compare's and suite's rows from every
rank to rank 0 (gemmlab/spread.py): a gather with a time limit, which says which ranks did not deliver.
Nothing here needs a GPU.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import GemmlabError

# (launcher, rank, size, local rank): the first whose rank and size are both set names this process.
LAUNCHERS = (
    ("mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
)
UID_KEY = "gemmlab-nccl-unique-id"
# How many ranks share this process's host, where the launcher says (Slurm says how many hosts instead).
LOCAL_SIZES = {"mpirun": "OMPI_COMM_WORLD_LOCAL_SIZE", "torchrun": "LOCAL_WORLD_SIZE", "mpich": "MPI_LOCALNRANKS"}


@dataclass(frozen=True)
class Place:
    """This process's rank in the job, the job's size, and which GPU of its host is its own."""
    rank: int
    world: int
    local_rank: int
    launcher: str  # mpirun, srun, torchrun, mpich, or "none" for a process on its own
    hosts: int = 1  # the hosts the job spans, as the launcher says (1 where it does not say)

    def gpu(self, env=None) -> int:
        """The GPU of this host that is this rank's: the only one CUDA_VISIBLE_DEVICES shows where the
        launcher gave each rank its own (srun --gpus-per-task, for one), else the local rank's."""
        env = os.environ if env is None else env
        seen = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        return 0 if len(seen) == 1 else self.local_rank


def _int(env, name: str, launcher: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise GemmlabError(f"{name}={env[name]!r} (set by {launcher}) is not a number") from None


def from_env(env=None) -> Place:
    """The place the launcher's environment gives this process; rank 0 of 1 without a launcher."""
    env = os.environ if env is None else env
    for launcher, rank_var, size_var, local_var in LAUNCHERS:
        if rank_var in env and size_var in env:
            rank, world = _int(env, rank_var, launcher), _int(env, size_var, launcher)
            local = _int(env, local_var, launcher) if local_var in env else rank
            if world < 1 or not 0 <= rank < world:
                raise GemmlabError(f"{launcher} says rank {rank} of {world}: not a rank of the job")
            if local < 0:
                raise GemmlabError(f"{launcher} says local rank {local}: not a GPU of this host")
            return Place(rank, world, local, launcher, _hosts(env, launcher, world))
    return Place(0, 1, 0, "none")


def _hosts(env, launcher: str, world: int) -> int:
    """The hosts a launcher's job spans: Slurm's node count, or the world over the ranks of one host."""
    if launcher == "srun":
        name = next((n for n in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES") if n in env), None)
        return max(1, _int(env, name, launcher)) if name else 1
    name = LOCAL_SIZES.get(launcher)
    if name and name in env:
        return -(-world // max(1, _int(env, name, launcher)))
    return 1


# ---------------------------------------------------------------------------- the unique id

def share_id(place: Place, make, store: str | None = None, timeout: float = 120.0, env=None) -> bytes:
    """The NCCL unique id, made by rank 0 (`make()`) and passed to every rank: by MPI broadcast under an
    MPI launcher with mpi4py, through a file with `store` = a path, through torch's TCP store under
    torchrun. A GemmlabError where none of these is there."""
    if place.world == 1:
        return make()
    return channel(place, store, timeout, env).bcast(make)


def channel(place: Place, store: str | None = None, timeout: float = 120.0, env=None, what: str = "the NCCL id"):
    """How the ranks of this job pass bytes: a FileStore with `store` = a path, MPI (mpi4py) under an MPI
    launcher, torch's TCP store where MASTER_ADDR and MASTER_PORT are set (torchrun). A GemmlabError
    where none of these is there (`what`: what is to be passed, for its message)."""
    env = os.environ if env is None else env
    if store:
        return FileStore(Path(store), job_id(env), place, timeout, what)
    if place.launcher in ("mpirun", "mpich", "srun"):
        try:
            from mpi4py import MPI
        except ImportError:
            MPI = None
        if MPI is not None and (place.launcher != "srun" or "PMI_RANK" in env or "PMIX_RANK" in env):
            return MpiChannel(MPI.COMM_WORLD, place)
    if "MASTER_ADDR" in env and "MASTER_PORT" in env:
        return TcpChannel(place, env, timeout)
    raise GemmlabError(f"no way to pass {what} from rank 0 to the others under {place.launcher}",
                       hint="install mpi4py (under mpirun or srun --mpi), run under torchrun, or give "
                            "--store PATH, a file on a file system every rank sees")


def _collect(place: Place, payload: bytes, timeout: float, take) -> dict[int, bytes]:
    """Rank 0's side of a gather: its own payload, then each other rank's as `take(rank)` finds it (bytes,
    or None while it has not come), polled until all have come or `timeout` seconds have passed."""
    got, deadline = {0: payload}, time.monotonic() + timeout
    while len(got) < place.world and time.monotonic() < deadline:
        for r in range(1, place.world):
            if r not in got and (data := take(r)) is not None:
                got[r] = data
        time.sleep(0.05)
    return got


class MpiChannel:
    """MPI.COMM_WORLD: a broadcast from rank 0; the gather as a message from each rank that rank 0 takes
    once it has come (MPI's own gather has no time limit, and cannot say which rank it waits for)."""
    TAG = 4646

    def __init__(self, comm, place: Place):
        self.comm, self.place = comm, place

    def bcast(self, make) -> bytes:
        return self.comm.bcast(make() if self.place.rank == 0 else None, root=0)

    def gather(self, payload: bytes, key: str, timeout: float) -> dict[int, bytes] | None:
        if self.place.rank != 0:
            self.comm.send((key, payload), dest=0, tag=self.TAG)
            return None

        def take(r):
            if self.comm.iprobe(source=r, tag=self.TAG):
                k, data = self.comm.recv(source=r, tag=self.TAG)
                return data if k == key else None
            return None
        return _collect(self.place, payload, timeout, take)


class TcpChannel:
    """torch.distributed's TCPStore at MASTER_ADDR:MASTER_PORT: torchrun's agent serves it (its workers
    are clients); without an agent rank 0 serves it. Made once and kept, so that a rank done early is
    connected already while rank 0 still works."""

    def __init__(self, place: Place, env, timeout: float):
        try:
            from datetime import timedelta
            from torch.distributed import TCPStore
        except ImportError:
            raise GemmlabError("passing data between ranks through MASTER_ADDR:MASTER_PORT needs torch.distributed",
                               hint="install torch, or give --store PATH") from None
        agent = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        self.place = place
        self.store = TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), place.world,
                              is_master=place.rank == 0 and not agent, timeout=timedelta(seconds=timeout))
        self.prefix = f"{UID_KEY}-{env.get('TORCHELASTIC_RUN_ID', '')}-{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"

    def bcast(self, make) -> bytes:
        if self.place.rank == 0:
            self.store.set(self.prefix, make())
        return bytes(self.store.get(self.prefix))

    def gather(self, payload: bytes, key: str, timeout: float) -> dict[int, bytes] | None:
        name = f"{self.prefix}-{key}-rank"
        if self.place.rank != 0:
            self.store.set(f"{name}{self.place.rank}", payload)
            return None
        return _collect(self.place, payload, timeout,
                        lambda r: bytes(self.store.get(f"{name}{r}")) if self.store.check([f"{name}{r}"]) else None)


def job_id(env) -> str:
    """What names this job among others, where the launcher says: an id in the store from an earlier job
    must not be taken for this one's."""
    names = ("SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid",
             "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")
    return "/".join(env.get(n, "") for n in names)


class FileStore:
    """The id in a file: rank 0 writes it whole (write, then rename), the others wait for one written by
    the same job (its first line is the job's id, where the launcher gives one)."""

    def __init__(self, path: Path, job: str = "", place: Place | None = None, timeout: float = 120.0,
                 what: str = "the NCCL id"):
        self.path, self.job, self.place, self.timeout, self.what = path, job.encode(), place, timeout, what

    def bcast(self, make) -> bytes:
        return self.share(self.place.rank, make, self.timeout)

    def part(self, rank: int) -> Path:
        return self.path.with_name(f"{self.path.name}.rank{rank}")

    def gather(self, payload: bytes, key: str, timeout: float) -> dict[int, bytes] | None:
        """Each rank's bytes in a file beside the store's (PATH.rankN, written whole, its first line the
        job's key); rank 0 takes each once it is there, and removes it."""
        rank, head = self.place.rank, key.encode() + b"\n"
        if rank != 0:
            tmp = self.path.with_name(f".{self.path.name}.rank{rank}.{os.getpid()}.tmp")
            tmp.write_bytes(head + payload)
            os.replace(tmp, self.part(rank))
            return None

        def take(r):
            try:
                data = self.part(r).read_bytes()
            except FileNotFoundError:
                return None
            if not data.startswith(head):  # an earlier job's
                return None
            self.part(r).unlink(missing_ok=True)
            return data[len(head):]
        return _collect(self.place, payload, timeout, take)

    def share(self, rank: int, make, timeout: float) -> bytes:
        if rank == 0:
            uid = make()
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(self.job + b"\n" + uid)
            os.replace(tmp, self.path)
            return uid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                job, _, uid = self.path.read_bytes().partition(b"\n")
            except FileNotFoundError:
                job, uid = None, b""
            if uid and job == self.job:
                return uid
            time.sleep(0.05)
        raise GemmlabError(f"rank {rank} waited {timeout:g} s for rank 0 to write {self.what} into {self.path}",
                           hint="every rank must see the same --store file (and rank 0 must have started)")
