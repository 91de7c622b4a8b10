"""Run a list of (variant, params) jobs on one shape: render and compile here, check and time in a
worker process, and hand each row on the moment it is measured.

Rendering and compiling need no GPU, so a template error is found here and becomes an ERROR row, and
a slow compile never counts against the worker's time limit. The GPU side runs in `worker.GpuJobs`:
a kernel that crashes becomes a CRASHED row, one that hangs a TIMEOUT row, and the next job gets a
fresh worker. `on_row` sees every row as it comes (the CLI
records it in the history and in the --out file), so a fault or Ctrl-C loses nothing measured before it.
"""

from __future__ import annotations

import hashlib
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .results import records
from .kernel import configure
from .errors import GemmlabError
from .gpu.launch import CUBLAS_SOURCE
from .results.model import Result, Shape, Timing
from .worker import SETUP_TIMEOUT_S, Fault, Isolated

DEFAULT_TIMEOUT_S = 60.0


@dataclass
class Options:
    reps: int = 10
    seed: int | None = None
    fp64_check: bool = False
    dtype: str = "fp32"  # the input type of every job in the run
    out_dtype: str = "fp32"  # C's type (--out-dtype): fp32, or the inputs' 16-bit type
    timeout: float = DEFAULT_TIMEOUT_S
    rounds: int = 1  # measurements of cuBLAS and of each job, taken in turns (see run_jobs)
    gpus: int = 1  # workers, one per GPU of this host: each job is timed alone on the GPU that takes it
    device: int | None = None  # with one worker, the GPU of this host it runs on (a launcher's rank's; None: the first)
    problem: str = "gemm"  # what the jobs compute (gemmlab/problems/); GEMM's path is gpu/problem.py
    inputs: str | None = None  # the input set a problem other than GEMM times (None: its first)
    refs: tuple = ()  # reference rows beside cuBLAS's (gpu/references.py: "cuBLASLt", "Triton"), GEMM only


def setup(shape: Shape, seed: int, opts: Options) -> tuple:
    """What a worker starts from: GEMM's shape, seed, check and input type, and for another problem
    which one it is and which of its input sets to time."""
    base = (shape, seed, opts.fp64_check, opts.dtype)
    if opts.problem != "gemm":
        return base + ({"name": opts.problem, "inputs": opts.inputs},)
    return base if opts.out_dtype == "fp32" else base + (None, opts.out_dtype)


def _doc(command: str, dev, shape: Shape, seed: int, opts: Options) -> dict:
    doc = records.meta(command, dev, shape, seed, opts.dtype)
    if opts.out_dtype != "fp32":
        doc["out_dtype"] = opts.out_dtype
    if opts.problem != "gemm":
        doc["problem"] = opts.problem
        if opts.inputs:
            doc["inputs"] = opts.inputs
    return doc


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def fresh_seed() -> int:
    return int.from_bytes(np.random.bytes(4), "little")


@dataclass
class _Entry:
    """A job (variant None: cuBLAS) in a run: what it compiled to, its results so far, its row once final."""
    variant: object
    params: dict
    kernel: object = None  # kernel.Kernel
    hash: str | None = None
    results: list = field(default_factory=list)
    row: dict | None = None
    gpu: int | None = None  # the GPU that measured it, where there were several
    ref: str | None = None  # a reference row beside cuBLAS's (gpu/references.py), not a job
    skipped: str | None = None  # a reference that cannot be had here: why (a note, no row)


def merge_rounds(results: list[Result]) -> Result:
    """One result for a kernel measured in several rounds: the first round that did not pass, if one did
    not (its failure is the row's), else the first round's with the median of the rounds' median times."""
    bad = next((r for r in results if r.valid_time is None), None)
    if bad is not None or len(results) == 1:
        return bad or results[0]
    medians = [r.timing.median_ms for r in results]
    timing = Timing(float(np.median(medians)), min(r.timing.min_ms for r in results),
                    max(r.timing.max_ms for r in results), sum(r.timing.reps for r in results), medians,
                    samples=[x for r in results for x in (r.timing.samples or [])] or None,
                    clocks=_clocks([r.timing.clocks for r in results]))
    return dataclasses.replace(results[0], timing=timing)


def _clocks(each: list[dict | None]) -> dict | None:
    """The clocks of several rounds as one: the lowest, the median of the medians, the highest, and
    every throttle reason seen."""
    seen = [c for c in each if c]
    if not seen:
        return None
    mids = sorted(c["sm_mhz"][1] for c in seen)
    return {"sm_mhz": [min(c["sm_mhz"][0] for c in seen), mids[len(mids) // 2], max(c["sm_mhz"][2] for c in seen)],
            "samples": sum(c["samples"] for c in seen),
            "throttle": sorted({t for c in seen for t in c["throttle"]})}


def run_jobs(command: str, jobs: list, shape: Shape, opts: Options, with_cublas: bool = True,
             keep_going: bool = False, on_phase=None, on_row=None,
             handler: str = "gemmlab.worker:GpuJobs") -> tuple[dict, list[dict]]:
    """(document, rows): the document's metadata and one row per job, cuBLAS's last. `jobs` is a list of
    (variant, params), or a function of the device that makes that list (for choices that depend on
    the GPU: `auto`, the sweep's cache and parallel compile), called after cuBLAS. `on_row(doc, row)`
    sees each row once it is final. Without keep_going, the first job that cannot even be built raises
    its GemmlabError. A KeyboardInterrupt ends the run early: the rows so far are returned and the
    document says `interrupted`. (`handler` is the worker's job handler; tests give a fake one.)

    With opts.rounds > 1, cuBLAS and every job are measured that many times, in turn and in alternating
    order (cuBLAS, 1, 2, .., n, then n, .., 2, 1, cuBLAS, ...), and each row has the median of its rounds:
    under a power cap the clock drifts over a run, and taking turns lets the drift touch every kernel
    alike. A job that fails a round is not measured again. Rows are final after their last round.

    With opts.gpus > 1, one worker per GPU (each with the same inputs, from the same seed): cuBLAS on
    the first, then every job on the next GPU that is free, timed alone there (see _on_gpus).

    opts.refs: reference rows (cuBLASLt, Triton: gpu/references.py) measured as cuBLAS is, after it in
    every round, their rows before cuBLAS's; one that cannot be had here has no row, and the document's
    "notes" say why."""
    if opts.gpus > 1:
        return _on_gpus(command, jobs, shape, opts, with_cublas, keep_going, on_phase, on_row, handler)
    seed = opts.seed if opts.seed is not None else fresh_seed()  # a restarted worker makes the same inputs
    on_phase = on_phase or (lambda text: None)
    on_row = on_row or (lambda doc, row: None)
    todo, cublas = [], _Entry(None, {})  # _Entry per job, in job order
    refs = [_Entry(None, {}, ref=name) for name in opts.refs]
    with Isolated(handler, setup(shape, seed, opts), opts.timeout, on_phase, gpu=opts.device) as w:
        info = w.start()  # no GPU, or no room for the inputs: a GemmlabError for the whole run
        dev = info["device"]
        doc = _doc(command, dev, shape, seed, opts)
        if opts.rounds > 1:
            doc["rounds"] = opts.rounds
        peak = dev.peak(opts.dtype)

        def finish(e: _Entry) -> None:  # the entry's row, from the rounds it has, handed on
            _finish(e, cublas, doc, peak, on_row)

        def measure(e: _Entry, rnd: int) -> None:
            _measure(w, e, e is cublas, dev, shape, opts, keep_going, on_phase, rnd)

        def done(e: _Entry) -> bool:  # all rounds measured, or one failed (or a reference skipped)
            return (e.skipped is not None or len(e.results) == opts.rounds
                    or bool(e.results) and e.results[-1].valid_time is None)

        def release() -> None:  # hand on the rows that are final, cuBLAS's first (the others' % of it)
            if with_cublas and cublas.row is None:
                if not done(cublas):
                    return
                finish(cublas)
            for e in refs + todo:
                if e.row is None and e.skipped is None and done(e):
                    finish(e)

        try:
            if with_cublas:
                measure(cublas, 0)
                release()
            todo += [_Entry(v, p) for v, p in (jobs(dev) if callable(jobs) else jobs)]
            for rnd in range(opts.rounds):
                entries = ([cublas] if with_cublas else []) + refs + todo
                for e in (entries if rnd % 2 == 0 else entries[::-1]):
                    if len(e.results) == rnd and not done(e):
                        measure(e, rnd)
                        release()
        except KeyboardInterrupt:
            w.kill()  # do not wait for the job in flight
            doc["interrupted"] = True
            for e in [cublas] + refs + todo:  # what was measured, with the rounds it had
                if e.row is None and e.results:
                    finish(e)
        _notes(doc, refs)
    rows = [e.row for e in todo + refs if e.row is not None]
    return doc, rows + ([cublas.row] if cublas.row else [])


def _notes(doc: dict, refs: list[_Entry]) -> None:
    """The document's notes: why each reference asked for has no row."""
    notes = [f"no {e.ref} row: {e.skipped}" for e in refs if e.skipped is not None]
    if notes:
        doc["notes"] = doc.get("notes", []) + notes


def _finish(e: _Entry, cublas: _Entry, doc: dict, peak: float, on_row) -> None:
    """The entry's row, from the rounds it has (cuBLAS's first: the others' % of it), handed on."""
    result = merge_rounds(e.results)
    cublas_ms = result.valid_time if e is cublas else cublas.row["ms"] if cublas.row else None
    e.row = records.row(result, peak, cublas_ms)
    e.row["source_hash"] = e.hash
    if e.gpu is not None:
        e.row["gpu"] = e.gpu
    on_row(doc, e.row)


def _measure(w, e: _Entry, is_cublas: bool, dev, shape: Shape, opts: Options, keep_going: bool, on_phase,
             rnd: int = 0) -> None:
    """One round of one entry on worker `w`: its Result appended (a fault or, with keep_going, an error
    becomes the Result; without keep_going a job that cannot be built raises its GemmlabError)."""
    reference = "cuBLAS" if opts.problem == "gemm" else "cupy"
    label = reference if is_cublas else e.ref or f"{e.variant.name} {records.params_text(e.params)}"
    on_phase(label if opts.rounds == 1 else f"round {rnd + 1}/{opts.rounds}: {label}")
    if e.ref:
        _measure_ref(w, e, shape, opts)
        return
    if is_cublas:
        try:
            e.results.append(w.call(("cublas", opts.reps), max(opts.timeout, SETUP_TIMEOUT_S)))  # loads cuBLAS
        except Fault as f:
            e.results.append(Result(reference, {}, shape, source=CUBLAS_SOURCE[opts.dtype] if reference == "cuBLAS"
                                    else opts.problem, dtype=opts.dtype, fault=f.kind, error=f.message))
        return
    v, params = e.variant.on(dev), e.params  # checked and rendered with this GPU's limits (limits.py)
    try:
        if e.kernel is None:  # built once, in the first round: no GPU needed, and not on the clock
            v.geometry(v.resolve(params), shape.M, shape.N, shape.K)  # a grid CUDA cannot launch: say so first
            e.kernel = configure(v, params, dev.arch)
            e.hash = source_hash(e.kernel.compiled.rendered.source)
        result = w.call(("run", e.kernel, opts.reps, True))
    except GemmlabError as err:
        if not keep_going:
            raise
        result = Result(v.name, dict(params), shape, source=str(v.path), user=not v.builtin,
                        dtype=opts.dtype, error=str(err))
    except Fault as f:
        result = Result(v.name, dict(params), shape, source=str(v.path), user=not v.builtin,
                        dtype=opts.dtype, fault=f.kind, error=f.message)
    e.results.append(result)


def _measure_ref(w, e: _Entry, shape: Shape, opts: Options) -> None:
    """One round of a reference row: its Result, or why it cannot be had here (e.skipped). A reference
    never ends the run: its failure is its row's."""
    from .gpu.references import Skipped  # (imports nothing of the GPU's)
    try:
        # its first round plans, autotunes or compiles (the worker says how long that may take)
        got = w.call(("ref", e.ref, opts.reps), max(opts.timeout, SETUP_TIMEOUT_S))
    except GemmlabError as err:
        got = Result(e.ref, {}, shape, dtype=opts.dtype, error=str(err))
    except Fault as f:
        got = Result(e.ref, {}, shape, dtype=opts.dtype, fault=f.kind, error=f.message)
    if isinstance(got, Skipped):
        e.skipped = got.why
    else:
        e.results.append(got)


def _on_gpus(command: str, jobs, shape: Shape, opts: Options, with_cublas: bool, keep_going: bool, on_phase, on_row,
             handler: str) -> tuple[dict, list[dict]]:
    """run_jobs over opts.gpus workers, one per GPU, each in a thread of this process that hands it one job
    at a time: a job is timed alone on its GPU, and rows come back in job order. Taking turns between
    rounds is a thing of one GPU, so several rounds do not go with several GPUs."""
    import threading
    if opts.rounds > 1:
        raise GemmlabError("--rounds takes turns on one GPU: it does not go with --gpus",
                           hint="give one of them")
    seed = opts.seed if opts.seed is not None else fresh_seed()
    lock = threading.Lock()
    said = on_phase or (lambda text: None)
    told = on_row or (lambda doc, row: None)

    def phase(gpu):
        def tell(text):
            with lock:
                said(f"GPU {gpu}: {text}")
        return tell

    workers = [Isolated(handler, setup(shape, seed, opts), opts.timeout, phase(g), gpu=g) for g in range(opts.gpus)]
    cublas, todo, queue, failed, stop = _Entry(None, {}), [], [], [], threading.Event()
    refs = [_Entry(None, {}, ref=name, gpu=0) for name in opts.refs]
    try:
        dev = workers[0].start()["device"]  # no GPU, or no room for the inputs: a GemmlabError for the run
        doc = _doc(command, dev, shape, seed, opts)
        doc["gpus"] = opts.gpus
        peak = dev.peak(opts.dtype)

        def work(g: int) -> None:
            while True:
                with lock:
                    if not queue or failed or stop.is_set():
                        return
                    e = queue.pop(0)
                e.gpu = g
                try:
                    _measure(workers[g], e, False, dev, shape, opts, keep_going, phase(g))
                except BaseException as err:  # a job that cannot be built (without keep_going): the run ends
                    with lock:
                        failed.append(err)
                    return
                with lock:
                    if stop.is_set():  # interrupted: its worker was killed under it, so it has no row
                        return
                    _finish(e, cublas, doc, peak, told)

        try:
            if with_cublas:
                cublas.gpu = 0
                _measure(workers[0], cublas, True, dev, shape, opts, keep_going, phase(0))
                _finish(cublas, cublas, doc, peak, told)
            for e in refs:  # on the first GPU, after cuBLAS, before the jobs start
                _measure(workers[0], e, False, dev, shape, opts, keep_going, phase(0))
                if e.skipped is None:
                    _finish(e, cublas, doc, peak, told)
            todo += [_Entry(v, p) for v, p in (jobs(dev) if callable(jobs) else jobs)]
            queue += todo
            threads = [threading.Thread(target=work, args=(g,), daemon=True) for g in range(opts.gpus)]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)  # a short wait, so that Ctrl-C reaches this thread
        except KeyboardInterrupt:
            stop.set()
            for w in workers:
                w.kill()  # do not wait for the jobs in flight
            doc["interrupted"] = True
        if failed:
            raise failed[0]
        _notes(doc, refs)
    finally:
        for w in workers:
            w.kill() if stop.is_set() or failed else w.close()
    rows = [e.row for e in todo + refs if e.row is not None]
    return doc, rows + ([cublas.row] if cublas.row else [])
