"""One rank: for each item of the job (a schedule with our kernel or with cuBLAS), make its blocks from the
seed, check the gathered C, then time the schedule and its local GEMMs alone. Rank 0 makes the rows.

Per item, in this order, so that a fault shows on the rank that has it:
1. its local GEMMs alone, once: a kernel that hangs or crashes does so here, while the other ranks go on
   to the check and wait there (the parent names the rank that is behind);
2. the check: the schedule once on NaN-poisoned outputs, C gathered on rank 0 and judged element by
   element against one GPU's reference (gemmlab/multigpu/inputs.py); every rank learns the verdict, and a
   failure ends the job after its row;
3. the timings: warm-up, then repetitions that each start on every rank together (a barrier), the L2
   flushed before each, and the host queueing a repetition while a spin kernel holds the GPU, so that
   Python's launch time never shows as a gap in the GPU's. With `Job.timeline` an arrival step's timed
   repetitions also record timing events (gemmlab/multigpu/execute.py's marks), which the rank hands to
   rank 0 afterwards: where each repetition spent its time (gemmlab/multigpu/rows.py's timeline).

`main` is the rank's process (gemmlab/multigpu/job.py starts it); `Rank` takes its runtime, communicator and
GEMMs as arguments, so the CPU tests run it on stand-ins.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from dataclasses import dataclass, field

from ..errors import GemmlabError
from ..results.model import FLUSH_BYTES, Shape
from . import rows as dist_rows
from .execute import RankRun, gather
from .inputs import Reference
from .schedule import Schedule, rank_plan

FAULT_ENV = "GEMMLAB_DIST_FAULT"  # "RANK:crash|hang|wrong": a rank misbehaves on purpose (the fault tests)


@dataclass(frozen=True)
class Item:
    schedule: str
    kernel: str        # a variant's name, or "cuBLAS"
    overlap: bool
    role: str          # "ours" or "baseline"


@dataclass
class Job:
    """Everything a rank needs (it pickles: the parent hands it to each rank's process)."""
    shape: Shape
    dtype: str
    seed: int
    items: list
    schedules: dict            # name -> Schedule
    variant: object = None     # templates.Variant of our kernel
    params: dict = field(default_factory=dict)
    reps: int = 20
    warmup: int = 3
    comm_sms: int = 0          # SMs our kernel leaves to NCCL's kernels where they overlap
    min_time_ms: float = 100.0  # repetitions enough to fill this, at least `reps`
    flush_bytes: int = FLUSH_BYTES  # read before each repetition: the L2 starts cold
    measure: bool = False      # measure NCCL's bandwidth instead (gemmlab/multigpu/bandwidth.py)
    timeline: bool = False     # record when an arrival step's barrier, chunks and GEMM ended (opt-in: events cost)


class Rank:
    def __init__(self, rank: int, ranks: int, job: Job, rt, comm, device, gemm_for, report):
        """`gemm_for(kernel_name, sms)` gives execute.RankRun's gemm(A, B, C); `report` the parent's ear
        (phase, row)."""
        self.rank, self.ranks, self.job, self.rt, self.comm = rank, ranks, job, rt, comm
        self.device, self.gemm_for, self.report = device, gemm_for, report
        self.reference = None
        self.flush = rt.xp.empty(job.flush_bytes // 4, dtype=rt.xp.float32) if job.flush_bytes else None
        self.fault = _fault(rank)

    def run(self) -> list[dict]:
        """Every item in turn (rank 0: their rows; a failed check ends the job). Everything but the comm
        stream's transfers runs on the compute stream: inputs, checks and barriers stay in its order."""
        with self.rt.on(self.rt.compute):
            return self._run()

    def _run(self) -> list[dict]:
        if self.job.measure:
            from .bandwidth import measure
            out = measure(self)
            for r in out if self.rank == 0 else []:
                self.report.row(r)
            return out
        out = []
        for item in self.job.items:
            r = self.item(item)
            if r is not None:
                out.append(r)
                self.report.row(r)
            if self._failed:
                break
        return out

    def item(self, item: Item):
        job, rank, rt = self.job, self.rank, self.rt
        sched: Schedule = job.schedules[item.schedule]
        plans = [rank_plan(sched, job.shape, self.ranks, r, job.dtype) for r in range(self.ranks)]
        label = f"{item.schedule} with {item.kernel}"
        # --comm-sms leaves SMs to NCCL's kernels; the copy engines need none
        leave = item.overlap and sched.overlaps and not sched.copy_engines
        sms = self.device.sms - job.comm_sms if leave else self.device.sms
        self.report.phase(f"{label}: make the inputs")
        run = RankRun(sched, plans[rank], job.shape, job.dtype, job.seed, rt, self.comm,
                      self.gemm_for(item.kernel, sms), item.overlap)
        self.report.phase(f"{label}: the local GEMMs alone")
        self._misbehave("hang")
        run.compute_only()
        rt.synchronize()
        self._misbehave("crash")
        self.report.phase(f"{label}: check")
        verdict, bad = self._check(run, plans)
        params = dict(job.params, ARRIVAL=True) if sched.arrival else job.params  # the build its GEMM ran
        make = dict(item=item, sched=sched, plan=plans[rank], shape=job.shape, ranks=self.ranks,
                    peak=self.device.peak(job.dtype), params=params)
        if self._failed:
            return dist_rows.row(check=verdict, bad_ranks=bad, **make) if rank == 0 else None
        self.report.phase(f"{label}: time")
        marked = job.timeline and sched.arrival and run.overlap
        run.marks = [] if marked else None
        total = self.timing(run.once)
        timeline = self._timeline(run.marks[-len(total[0]):]) if marked else None  # the timed repetitions'
        run.marks = None
        self.report.phase(f"{label}: time the local GEMMs alone")
        compute = self.timing(run.compute_only)
        if rank != 0:
            return None
        return dist_rows.row(total=total, compute=compute, check=verdict, timeline=timeline, **make)

    _failed = False

    def _check(self, run: RankRun, plans):
        rt, xp, job = self.rt, self.rt.xp, self.job
        run.poison()
        run.once()
        rt.synchronize()
        if self._misbehave("wrong"):
            with rt.on(rt.compute):
                rt.add(run.C[:1, :1], xp.ones((1, 1), dtype=xp.float32))
        C = gather(run, plans, job.shape, self.comm, rt)
        verdict, bad = None, []
        flag = xp.zeros(1, dtype=xp.float32)
        if self.rank == 0:
            if self.reference is None:
                self.report.phase("make the reference on one GPU")
                self.reference = Reference(xp, job.seed, job.shape.M, job.shape.N, job.shape.K, job.dtype)
            verdict, bad = self.reference.check(xp, C, [(p.rank, p.C) for p in plans])
            del C
            flag[...] = 0.0 if verdict.passed else 1.0
        self.comm.allreduce_max(flag, rt.compute)  # every rank learns the verdict
        rt.synchronize()
        self._failed = bool(float(flag[0]))
        return verdict, bad

    def _timeline(self, marks):
        """Every rank's events of `marks` (execute.py), each as milliseconds after its repetition's start
        (NaN for one the schedule has not: no barrier), repetition after repetition: a ranks x (reps x
        events) array, which rows.timeline_of reads."""
        rt = self.rt
        mine = [rt.elapsed(m[0], e) if e is not None else float("nan") for m in marks for e in m[1:]]
        return self.comm.allgather_values(mine, rt.compute)

    def timing(self, fn, stream=None, before=None):
        """ranks x reps milliseconds of fn(), each repetition started on every rank together; timed on
        `stream` (the compute stream), after before() is queued (untimed)."""
        rt, comm, job, xp = self.rt, self.comm, self.job, self.rt.xp
        token = xp.zeros(1, dtype=xp.float64)

        def barrier():
            comm.allreduce_max(token, rt.compute)
            rt.synchronize()

        stream = stream or rt.compute
        warm, queue_s = [], 0.0
        for _ in range(job.warmup):
            barrier()
            t0 = time.perf_counter()
            if before:
                before()
            with rt.timed(stream, warm):
                fn()
                queue_s = max(queue_s, time.perf_counter() - t0)
        # every rank must run as many repetitions, and spin as long: agree on the largest
        agree = xp.asarray([min(0.005, 2 * queue_s + 20e-6), max(warm or [1.0])], dtype=xp.float64)
        comm.allreduce_max(agree, rt.compute)
        rt.synchronize()
        spin_s, est_ms = (float(x) for x in agree)
        reps = max(job.reps, min(1000, int(job.min_time_ms / max(est_ms, 1e-3))))
        times = []
        for _ in range(reps):
            if self.flush is not None:
                with rt.on(rt.compute):
                    rt.evict(self.flush)  # inputs out of L2, its lines clean: every repetition starts cold
            barrier()
            rt.spin(rt.compute, int(spin_s * 1e9))
            if before:
                before()
            with rt.timed(stream, times):
                fn()
        return comm.allgather_values(times, rt.compute)

    def _misbehave(self, kind: str) -> bool:
        if self.fault != kind or self._faulted:
            return False
        self._faulted = True
        if kind == "hang":
            time.sleep(3600)
        if kind == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return True

    _faulted = False


def _fault(rank: int) -> str | None:
    text = os.environ.get(FAULT_ENV, "")
    who, _, kind = text.partition(":")
    return kind if who.strip() == str(rank) else None


# ---------------------------------------------------------------------------- the process

class Report:
    """A rank's messages to its parent (gemmlab/multigpu/job.py): progress, rank 0's rows, how it ended."""

    def __init__(self, conn, rank: int):
        self.conn, self.rank = conn, rank

    def phase(self, text: str) -> None:
        self.conn.send(("phase", self.rank, text))

    def meta(self, doc: dict) -> None:
        self.conn.send(("meta", self.rank, doc))

    def row(self, r: dict) -> None:
        self.conn.send(("row", self.rank, r))

    def end(self, kind: str, *what) -> None:
        self.conn.send((kind, self.rank, *what))


def gemm_maker(kernel, dtype: str, device, arrival_kernel=None):
    """gemm_for(name, sms): cuBLAS, or our kernel planned for each local shape on `sms` SMs. A gemm with
    `arrival` (allgather_overlap with arrival = true) takes arrival_kernel(): our kernel with ARRIVAL on."""
    from ..gpu.launch import cublas_gemm, prepare

    def gemm_for(name: str, sms: int):
        if name == "cuBLAS":
            def cublas(A, B, C, arrival=None):
                if arrival is not None:
                    raise GemmlabError("cuBLAS cannot start on rows as they arrive (arrival = true)",
                                       hint="run the schedule with --variant wgmma_ws")
                if dtype == "fp32":
                    import cupy
                    return lambda: cupy.matmul(A, B, out=C)
                return lambda: cublas_gemm(A, B, C, dtype)
            return cublas
        prepared = {}

        def gemm(A, B, C, arrival=None):
            (m, k), n = A.shape, B.shape[1]
            key = (m, n, k, arrival is not None)
            if key not in prepared:
                if arrival is not None and arrival_kernel is None:
                    raise GemmlabError(f"variant '{kernel.name}' has no ARRIVAL parameter: it cannot start on rows "
                                       "as they arrive (arrival = true)",
                                       hint="run the schedule with --variant wgmma_ws")
                prepared[key] = prepare(kernel if arrival is None else arrival_kernel(), m, n, k, device, sms=sms)
            return prepared[key].bind(A, B, C, arrival=arrival)
        return gemm
    return gemm_for


def wants_copy_engines(job: Job) -> bool:
    """Whether the job's communicator is nccl4py's zero-CTA one: for a schedule with engines = "copy",
    and for --measure where nccl4py is there (its copy-engine all-gather beside NCCL's kernels')."""
    from .comm import copy_engines_missing
    if job.measure:
        return copy_engines_missing() is None
    return any(job.schedules[i.schedule].copy_engines for i in job.items)


def main(conn, rank: int, ranks: int, gpu: int, uid: bytes, job: Job) -> None:
    """A rank's process: its GPU, NCCL, our kernel compiled for it, then the items; how it ended goes to
    the parent, which stops every rank on a fault."""
    from .comm import CopyEngineNccl, Cuda, Nccl, keep_multicast_off
    keep_multicast_off()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops every rank
    report = Report(conn, rank)
    try:
        from ..gpu.device import get_device
        from ..gpu.driver import cuda
        from ..kernel import configure
        from ..results.records import meta
        cupy = cuda()
        if gpu >= cupy.cuda.runtime.getDeviceCount():
            raise GemmlabError(f"rank {rank} has no GPU: it would take GPU {gpu}, and this process sees "
                               f"{cupy.cuda.runtime.getDeviceCount()}")
        cupy.cuda.Device(gpu).use()
        device = get_device()
        report.phase("start NCCL")
        comm = (CopyEngineNccl if wants_copy_engines(job) else Nccl)(ranks, uid, rank)
        kernel, arrival_kernel = None, None
        if job.variant is not None:
            report.phase(f"compile {job.variant.name}")
            kernel = configure(job.variant.on(device), job.params, device.arch)
            if "ARRIVAL" in job.variant.params:  # a second build, for schedules with arrival = true, when asked
                built = []

                def arrival_kernel():
                    if not built:
                        report.phase(f"compile {job.variant.name} with ARRIVAL=true")
                        built.append(configure(job.variant.on(device), dict(job.params, ARRIVAL=True), device.arch))
                    return built[0]
        if rank == 0:
            report.meta(dict(meta("dist", device, job.shape, job.seed, job.dtype),
                             nccl=comm.lib.get_version()))
        gemm_for = gemm_maker(kernel, job.dtype, device, arrival_kernel)
        Rank(rank, ranks, job, Cuda(), comm, device, gemm_for, report).run()
        report.end("done")
    except GemmlabError as e:
        report.end("error", e.message, e.hint)
    except BaseException as e:  # a CUDA error, or a bug: the rank is done for, and says why
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        report.end("fault", last, traceback.format_exc())
    finally:
        conn.close()
        os._exit(0)  # no teardown: after a CUDA fault cupy's destructors would only add tracebacks
