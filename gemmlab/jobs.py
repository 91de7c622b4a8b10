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
from dataclasses import dataclass

import numpy as np

from . import report
from .compile import compile_rendered
from .errors import GemmlabError
from .render import render
from .runner import CUBLAS_SOURCE, Result, Shape
from .worker import SETUP_TIMEOUT_S, Fault, Isolated

DEFAULT_TIMEOUT_S = 60.0


@dataclass
class Options:
    reps: int = 10
    seed: int | None = None
    fp64_check: bool = False
    dtype: str = "fp32"  # the input type of every job in the run
    timeout: float = DEFAULT_TIMEOUT_S


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def fresh_seed() -> int:
    return int.from_bytes(np.random.bytes(4), "little")


def run_jobs(command: str, jobs: list, shape: Shape, opts: Options, with_cublas: bool = True,
             keep_going: bool = False, on_phase=None, on_row=None,
             handler: str = "gemmlab.worker:GpuJobs") -> tuple[dict, list[dict]]:
    """(document, rows): the document's metadata and one row per job, cuBLAS's last. `jobs` is a list of
    (variant, params), or a function of the device that makes that list (for choices that depend on
    the GPU: `auto`, the sweep's cache and parallel compile), called after cuBLAS. `on_row(doc, row)`
    sees each row as it is made. Without keep_going, the first job that cannot even be built raises
    its GemmlabError. A KeyboardInterrupt ends the run early: the rows so far are returned and the
    document says `interrupted`. (`handler` is the worker's job handler; tests give a fake one.)"""
    seed = opts.seed if opts.seed is not None else fresh_seed()  # a restarted worker makes the same inputs
    on_phase = on_phase or (lambda text: None)
    on_row = on_row or (lambda doc, row: None)
    rows, cublas_row = [], None
    with Isolated(handler, (shape, seed, opts.fp64_check, opts.dtype), opts.timeout, on_phase) as w:
        info = w.start()  # no GPU, or no room for the inputs: a GemmlabError for the whole run
        dev = info["device"]
        doc = report.meta(command, dev, shape, seed, opts.dtype)
        peak = dev.peak(opts.dtype)

        def finish(result: Result, cublas_ms=None, hash_=None) -> dict:
            row = report.row(result, peak, cublas_ms)
            row["source_hash"] = hash_
            on_row(doc, row)
            return row

        try:
            cublas_ms = None
            if with_cublas:
                on_phase("cuBLAS")
                try:
                    cublas = w.call(("cublas", opts.reps), max(opts.timeout, SETUP_TIMEOUT_S))  # loads cuBLAS
                except Fault as f:
                    cublas = Result("cuBLAS", {}, shape, source=CUBLAS_SOURCE[opts.dtype], dtype=opts.dtype,
                                    fault=f.kind, error=f.message)
                cublas_ms = cublas.valid_time
                cublas_row = finish(cublas, cublas_ms)
            for v, params in (jobs(dev) if callable(jobs) else jobs):
                on_phase(f"{v.name} {report.params_text(params)}")
                hash_ = None
                try:
                    rendered = render(v, params)
                    hash_ = source_hash(rendered.source)
                    v.geometry(params, shape.M, shape.N, shape.K)  # a grid CUDA cannot launch: say so here
                    compiled = compile_rendered(rendered, dev.arch)  # no GPU needed, and not on the clock
                    result = w.call(("run", compiled, opts.reps, True))
                except GemmlabError as e:
                    if not keep_going:
                        raise
                    result = Result(v.name, dict(params), shape, source=str(v.path), user=not v.builtin,
                                    dtype=opts.dtype, error=str(e))
                except Fault as f:
                    result = Result(v.name, dict(params), shape, source=str(v.path), user=not v.builtin,
                                    dtype=opts.dtype, fault=f.kind, error=f.message)
                rows.append(finish(result, cublas_ms, hash_))
        except KeyboardInterrupt:
            w.kill()  # do not wait for the job in flight
            doc["interrupted"] = True
    return doc, rows + ([cublas_row] if cublas_row else [])
