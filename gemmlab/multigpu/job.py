"""A distributed run: start the ranks' processes, watch them, stop them all on a fault, keep the rows.

With `--gpus N` (no launcher) this process starts N ranks on this host, one per GPU, and makes the NCCL
id itself. Under mpirun, srun or torchrun every process the launcher started does the same for the one
rank it is (gemmlab/multigpu/launcher.py says which), after the id has come from rank 0 through the launcher.
Either way a rank runs in a child process (gemmlab/multigpu/rank.py:main) and this one only watches, as
gemmlab/worker.py does for one GPU: a CUDA fault or a hang cannot take the results with it.

A rank that crashes, reports an error, or makes no progress for `timeout` seconds ends the job: every
rank this process started is killed, and the message names the rank. Under a launcher the other hosts'
processes end too, since this one exits with status 1 (mpirun, srun --kill-on-bad-exit and torchrun stop
a job when one of its processes fails).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.connection import wait

from ..errors import GemmlabError
from .comm import keep_multicast_off

_ctx = multiprocessing.get_context("spawn")  # CUDA does not survive fork
RANK_MAIN = "gemmlab.multigpu.rank:main"
RANK_MAIN_ENV = "GEMMLAB_DIST_RANK"  # tests: a stand-in for a rank's process (tests/dist_ranks.py)


class JobFault(GemmlabError):
    """A rank crashed, hung or gave an error: the job was stopped. The message names the rank."""


def _target():
    import importlib
    module, name = (os.environ.get(RANK_MAIN_ENV) or RANK_MAIN).split(":")
    return getattr(importlib.import_module(module), name)


class Ranks:
    """The rank processes this process started, and their pipes."""

    def __init__(self, ranks: list[tuple[int, int]], world: int, uid: bytes, job):
        keep_multicast_off()  # inherited by every rank (and set again there before NCCL starts)
        self.procs, self.conns, self.of = {}, {}, {}
        target = _target()
        for rank, local in ranks:
            mine, theirs = _ctx.Pipe()
            p = _ctx.Process(target=target, args=(theirs, rank, world, local, uid, job), daemon=True)
            p.start()
            theirs.close()  # so that the rank's death reads as EOF here
            self.procs[rank], self.conns[rank], self.of[mine] = p, mine, rank

    def kill(self) -> None:
        """Every rank gone, their GPU memory with them: nothing is left behind."""
        for p in self.procs.values():
            if p.is_alive():
                p.kill()
        for p in self.procs.values():
            p.join(10)

    def exit_text(self, rank: int) -> str:
        p = self.procs[rank]
        p.join(5)
        code = p.exitcode
        if code is None:
            return ""
        return f" (killed by signal {-code})" if code < 0 else f" (exit code {code})"


def watch(ranks: Ranks, timeout: float, on_phase, on_meta, on_row, world: int) -> None:
    """Hand on the ranks' messages until all are done. A fault kills every rank and raises JobFault."""
    progress = {r: 0 for r in ranks.procs}
    last = {r: "starting" for r in ranks.procs}
    live = dict(ranks.of)
    try:
        deadline = time.monotonic() + timeout
        while live:
            ready = wait(list(live), max(0.0, deadline - time.monotonic()))
            if not ready:
                raise JobFault(_hung(progress, last, set(live.values()), timeout, world))
            deadline = time.monotonic() + timeout
            for conn in ready:
                rank = live[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    raise JobFault(f"rank {rank} crashed{ranks.exit_text(rank)} during '{last[rank]}'; "
                                   "the job was stopped") from None
                kind = msg[0]
                if kind == "phase":
                    progress[rank] += 1
                    last[rank] = msg[2]
                    on_phase(rank, msg[2])
                elif kind == "meta":
                    on_meta(msg[2])
                elif kind == "row":
                    on_row(msg[2])
                elif kind == "done":
                    del live[conn]
                elif kind == "error":
                    raise JobFault(f"rank {rank}: {msg[2]}", msg[3])
                else:  # "fault": an exception the rank did not expect (a CUDA error, or a bug)
                    raise JobFault(f"rank {rank} crashed during '{last[rank]}': {msg[2]}; the job was stopped",
                                   "GEMMLAB_DEBUG=1 shows the rank's traceback" if not os.environ.get("GEMMLAB_DEBUG")
                                   else msg[3])
    finally:
        ranks.kill()


def _hung(progress: dict, last: dict, live: set, timeout: float, world: int) -> str:
    """Which rank hung: among those not done, the ones behind the others (the rest wait for them)."""
    least = min(progress[r] for r in live)
    behind = sorted(r for r in live if progress[r] == least)
    ahead = sorted(r for r in live if progress[r] > least)
    who = f"rank{'s' if len(behind) > 1 else ''} {', '.join(map(str, behind))}"
    text = f"{who} made no progress for {timeout:g} s (last: '{last[behind[0]]}')"
    if ahead:
        text += f"; rank{'s' if len(ahead) > 1 else ''} {', '.join(map(str, ahead))} waited for it at '{last[ahead[0]]}'"
    elif len(live) < world and len(behind) == 1:
        text += "; the other ranks are in other processes"
    return text + "; the job was stopped (raise the limit with --timeout)"


# ---------------------------------------------------------------------------- a whole run

def gpu_count() -> int:
    from ..gpu.driver import cuda
    return cuda().cuda.runtime.getDeviceCount()


def check_job(job, world: int) -> None:
    """Every rank's blocks, and our kernel's plan for every local GEMM, before any process starts: a
    shape the split or the kernel cannot take is one clear error, not one per rank."""
    from .comm import COPY_ENGINES_HINT, TRANSPORT_HINT, copy_engines_missing, transport_missing
    from .schedule import rank_plan
    ce = sorted({i.schedule for i in job.items if job.schedules[i.schedule].copy_engines})
    if ce and (why := copy_engines_missing()):
        raise GemmlabError(f"{', '.join(ce)} moves data with NCCL's copy engines, through nccl4py: {why}",
                           hint=COPY_ENGINES_HINT)
    for name in sorted({i.schedule for i in job.items}):
        transport = job.schedules[name].transport
        if transport != "allgather" and world > 1 and (why := transport_missing(transport)):
            raise GemmlabError(f"{name} moves rows with transport = \"{transport}\": {why}", hint=TRANSPORT_HINT)
    for item in job.items:
        sched = job.schedules[item.schedule]
        for r in range(world):
            plan = rank_plan(sched, job.shape, world, r, job.dtype)
            if item.kernel != "cuBLAS":
                for m, n, k in set(plan.gemms):
                    job.variant.geometry(job.variant.resolve(job.params), m, n, k)


def run(job, gpus: int | None, reporter, store: str | None = None, timeout: float = 120.0, out_path=None,
        single: bool = True, make_id=None, env=None) -> tuple[dict, list[dict], int]:
    """(document, rows, this process's rank). Rank 0's process gets the rows (and writes `out_path` after
    each); the others get none. With `single`, rank 0 also measures our kernel and cuBLAS on one GPU for
    the whole problem afterwards (where it fits): the scaling efficiency's yardstick."""
    from ..files import write_atomic
    from ..present.export import dump
    from . import rows as dist_rows
    from .comm import unique_id
    from .launcher import from_env, share_id
    place = from_env(env)
    make_id = make_id or unique_id
    if place.world > 1:
        if gpus not in (None, place.world):
            raise GemmlabError(f"--gpus {gpus} under {place.launcher}, which started {place.world} ranks",
                               hint="under a launcher the launcher says how many GPUs: leave --gpus out")
        world, local = place.world, [(place.rank, place.gpu(env))]  # its GPU: the one it is shown, if only one
        waits = sorted({i.schedule for i in job.items if job.schedules[i.schedule].arrival})
        if waits and place.hosts > 1:
            # NCCL's copy-engine all-gather reaches the GPUs of one host; across hosts NCCL runs it on its
            # kernels, which would wait for SMs that our GEMM holds while it waits for their rows
            raise GemmlabError(f"{', '.join(waits)} waits for rows that NCCL's copy engines bring, within one host; "
                               f"{place.launcher} spread this job over {place.hosts} hosts",
                               hint="across hosts choose allgather_ce (there on NCCL's kernels), allgather or ring")
    else:
        world = gpus or gpu_count()
        local = [(r, r) for r in range(world)]
    check_job(job, world)
    uid = share_id(place, make_id, store, timeout=max(timeout, 120.0), env=env) if place.world > 1 else make_id()
    doc = {"command": "dist", "shape": {"M": job.shape.M, "N": job.shape.N, "K": job.shape.K}, "dtype": job.dtype,
           "seed": job.seed, "gpus": world, "launcher": place.launcher if place.world > 1 else "gemmlab",
           "comm_sms": job.comm_sms, "schedules": sorted({i.schedule for i in job.items}),
           "measure": job.measure}
    rows: list[dict] = []

    def save():
        if out_path and place.rank == 0:
            write_atomic(out_path, dump(dict(doc, rows=rows)))

    def on_meta(meta: dict):
        doc.update({k: v for k, v in meta.items() if k not in doc or k == "command"})

    def on_row(r: dict):
        rows.append(r)
        reporter.advance()
        save()

    reporter.total(len(job.items) if not job.measure else None)
    try:
        watch(Ranks(local, world, uid, job), timeout, lambda r, text: reporter.phase(f"rank {r}: {text}"),
              on_meta, on_row, world)
    except JobFault as f:
        doc["fault"] = f.message if not f.hint else f"{f.message} ({f.hint})"
    failed = any(r["status"] != "PASS" for r in rows)
    if place.rank == 0 and single and not job.measure and "fault" not in doc and not failed:
        found, why = one_gpu(job, timeout, reporter)
        rows += [dist_rows.one_gpu(r, job.shape) for r in found]
        if why:
            doc["one_gpu"] = why
    if not job.measure:
        dist_rows.finish(rows)
    save()
    return doc, rows, place.rank


def one_gpu(job, timeout: float, reporter) -> tuple[list[dict], str | None]:
    """Our kernel and cuBLAS on one GPU for the whole problem (gemmlab/jobs.py's worker): their rows, or
    why there are none (it does not fit, say)."""
    from ..jobs import Options, run_jobs
    opts = Options(reps=job.reps, seed=job.seed, dtype=job.dtype, timeout=timeout)
    todo = [(job.variant, dict(job.params))] if job.variant is not None else []
    reporter.phase("one GPU: the whole problem")
    try:
        _, found = run_jobs("dist", todo, job.shape, opts, with_cublas=True, keep_going=True,
                            on_phase=lambda text: reporter.phase(f"one GPU: {text}"))
    except GemmlabError as e:
        reporter.note(f"no one-GPU baseline: {e.message}")
        return [], e.message
    return found, None
