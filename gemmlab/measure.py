"""The measuring commands as plain functions: run, compare, sweep and a list of shapes (suite,
scaling). Each checks and times its jobs through jobs.run_jobs, records every row in the history the
moment it is measured (and in the --out file), and returns (document, rows): the document's metadata
and the rows, cuBLAS's last. gemmlab/api.py wraps them in typed results; the CLI presents those.

Nothing here prints: what a user should see while it runs goes to a Reporter (present/progress.py:
the silent one, or a progress bar).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .errors import GemmlabError
from .files import write_atomic
from .jobs import Options, run_jobs, source_hash
from .present.export import dump
from .present.progress import Reporter
from .render import render
from .results import history, metrics, records
from .results.model import Shape
from .templates import Catalog, Variant


class Recorder:
    """Takes each row the moment it is measured: its change against the last run of the same variant
    and shape (from the history), then into the history and, with out_path, into that file (atomically),
    so a fault or Ctrl-C loses nothing measured before it. With defer (a rank other than 0 under a
    launcher: gemmlab/spread.py) a row only says where it belongs in the history (its "_record"), for
    rank 0 to record it."""

    def __init__(self, out_path: Path | None, reporter: Reporter, record: bool = True, defer: bool = False):
        self.out_path, self.reporter, self.record, self.rows, self.warned = out_path, reporter, record, [], False
        self.defer = defer

    def __call__(self, doc: dict, row: dict) -> None:
        self.take(row, [doc["command"], doc["shape"], doc["device"]["name"], doc["commit"], row.get("dtype", "fp32")])
        self.save(doc)

    def take(self, row: dict, where: list) -> None:
        """One row into the history at `where` (command, shape, device, commit, input type), with its change."""
        prev = None
        if self.defer:
            row["_record"] = where
        elif self.record:
            try:
                prev = history.record(where[0], row, *where[1:])
            except GemmlabError as e:
                if not self.warned:
                    self.reporter.note(f"{e.message}; results are not being recorded")
                    self.warned = True
        d = history.delta(row, prev)
        row.update(vs_last=d["vs_last"], vs_last_text=history.delta_text(d), changed=d["changed"],
                   vs_last_noise=d.get("noise"), outside_noise=d.get("outside_noise"))
        self.rows.append(row)

    def save(self, doc: dict, rows: list[dict] | None = None) -> None:
        if self.out_path:
            write_atomic(self.out_path, dump(dict(doc, rows=rows if rows is not None else self.rows)))


def measure(command: str, jobs, shape: Shape, opts: Options, reporter: Reporter, out_path: Path | None = None,
            with_cublas: bool = True, keep_going: bool = False, total: int | None = None,
            record: bool = True, said: set | None = None, defer: bool = False) -> tuple[dict, list[dict], Recorder]:
    """Check and time each (variant, params) of `jobs` (or of jobs(device)) on one set of inputs, cuBLAS
    first, in a worker process (jobs.py). With keep_going a variant that does not build is an ERROR row.
    The document's notes (a reference row that cannot be had) go to the reporter, each once (`said`: the
    notes already given, over several calls). defer: the rows say where they belong in the history,
    for rank 0 to record them (Recorder)."""
    recorder = Recorder(out_path, reporter, record, defer)
    reporter.total(total)

    def on_row(doc, row):
        recorder(doc, row)
        if not metrics.is_reference(row):
            reporter.advance()

    doc, rows = run_jobs(command, jobs, shape, opts, with_cublas=with_cublas, keep_going=keep_going,
                         on_phase=reporter.phase, on_row=on_row)
    said = set() if said is None else said
    for note in doc.get("notes", []):
        if note not in said:
            said.add(note)
            reporter.note(note)
    if doc.get("notes"):  # (they come after the last row: the --out file is written again to hold them)
        recorder.save(doc)
    if total is not None:
        doc["planned"] = total
    return doc, rows, recorder


def auto_jobs(cat: Catalog, shape: Shape, reporter: Reporter, dtype: str = "fp32", out_dtype: str = "fp32"):
    """`auto`'s job for a shape and input type. The choice needs the GPU (its name for the tuning cache,
    its SM count), so it is made once the worker has said which GPU it has."""
    from .results.tuning import choose

    def jobs(dev):
        v, params, how = choose(cat, dev.name, shape, dev.sms, dtype, out_dtype)
        reporter.note(f"auto chose {v.name} {records.params_text(params)} ({how})")
        return [(v, params)]
    return jobs


def run(v: Variant | None, params: dict, shape: Shape, opts: Options, reporter: Reporter, cat: Catalog,
        out_path: Path | None = None, with_cublas: bool = True, record: bool = True) -> tuple[dict, list[dict]]:
    """One variant at `params` (v None: `auto` chooses for the shape) beside cuBLAS."""
    if v is None:
        jobs = auto_jobs(cat, shape, reporter, opts.dtype, opts.out_dtype)
    else:
        render(v, params)  # a template that cannot render is one error before any GPU work (cuBLAS included)
        jobs = [(v, params)]
    doc, rows, _ = measure("run", jobs, shape, opts, reporter, out_path, with_cublas=with_cublas, total=1,
                           record=record)
    return doc, rows


def compare(chosen: list[Variant], shape: Shape, opts: Options, reporter: Reporter, out_path: Path | None = None,
            record: bool = True, team=None) -> tuple[dict, list[dict]]:
    """Each variant at its defaults for the input type, cuBLAS beside them, with speed-ups rung over rung.
    team (gemmlab/spread.py): this rank's share of the variants; rank 0 gets every rank's rows."""
    jobs = [(v, v.resolve(v.for_dtype(opts.dtype, None, opts.out_dtype))) for v in chosen]
    place = {v.name: i for i, v in reversed(list(enumerate(chosen)))}

    def work(mine, lead):
        doc, rows, _ = measure("compare", mine, shape, opts, reporter, out_path if lead else None, keep_going=True,
                               total=len(mine), record=record and lead, defer=not lead)
        return doc, rows

    def order(rows):  # the variants in the order asked for, then each rank's references (cuBLAS last)
        return sorted(rows, key=lambda r: (metrics.is_reference(r), r["rank"] if metrics.is_reference(r)
                                           else place.get(r["variant"], len(place)), r["variant"] == "cuBLAS"))

    doc, rows = spread_over(team, "compare", jobs, work, order, reporter, record, opts.timeout)
    if doc.get("rank", 0) == 0:
        metrics.add_speedups(rows)
        _save(out_path, doc, rows)
    return doc, rows


def _save(out_path: Path | None, doc: dict, rows: list[dict]) -> None:
    if out_path:
        write_atomic(out_path, dump(dict(doc, rows=rows)))


def spread_over(team, command: str, items: list, work, order, reporter: Reporter, record: bool,
                timeout: float) -> tuple[dict, list[dict]]:
    """work(items, lead) -> (document, rows): the whole of `items` in this process without a team; under
    a launcher (team: gemmlab/spread.py) this rank's share, after which rank 0 gathers every rank's rows
    (recorded in the history as they come) and puts them in order(rows), and each other rank hands its
    rows over and gets a document that says only which rank it is (its own rows, as measured)."""
    if team is None:
        return work(items, True)
    mine = team.share(items)
    try:
        doc, rows = work(mine, team.lead) if mine else (None, [])
    except GemmlabError as e:
        if not team.lead:  # rank 0 names it, and keeps what the others measured
            team.deliver(command, None, [], e)
        raise
    if not team.lead:
        return team.deliver(command, doc, rows), rows
    return doc, order(team.gather(doc, rows, Recorder(None, reporter, record), timeout))


class _OnGpu(Reporter):
    """A Reporter for one of several threads: what runs now says its GPU, and one thread at a time."""

    def __init__(self, reporter: Reporter, lock, gpu: int):
        self.reporter, self.lock, self.gpu = reporter, lock, gpu

    def phase(self, text: str) -> None:
        with self.lock:
            self.reporter.phase(f"GPU {self.gpu}: {text}")

    def advance(self) -> None:
        with self.lock:
            self.reporter.advance()

    def note(self, text: str) -> None:
        with self.lock:
            self.reporter.note(text)


def deal_over_gpus(gpus: int, items: list, work, order, reporter: Reporter) -> tuple[dict, list[dict]]:
    """--gpus N on one host, without a launcher, for work whose items are whole (a suite's shapes, each
    with cuBLAS and all its jobs, so that its x cuBLAS is one GPU's): the items dealt out in turn to N
    threads, each running work(share, gpu, reporter, taken) with its own worker on its GPU; that records
    its rows in the history as they come, and hands each item's rows to taken(rows). (document, rows):
    every row tagged with its GPU, in order(rows). A GPU that cannot run at all (its worker does not
    start) is named in the document's "fault", the others' rows kept, as under a launcher. Ctrl-C returns
    the rows of the items finished so far and marks the document interrupted (the workers in flight die
    with this process)."""
    import threading
    n = min(gpus, len(items))
    lock, got, docs, errors = threading.Lock(), [], [None] * n, {}

    def taken(gpu):
        def take(rows):
            with lock:
                got.extend(dict(r, gpu=gpu) for r in rows)
        return take

    def run(gpu):
        try:
            docs[gpu] = work(items[gpu::n], gpu, _OnGpu(reporter, lock, gpu), taken(gpu))
        except BaseException as e:  # named or raised again below, in the caller's thread
            errors[gpu] = e

    threads = [threading.Thread(target=run, args=(g,), daemon=True) for g in range(n)]
    for t in threads:
        t.start()
    interrupted = False
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)  # a short wait, so that Ctrl-C reaches this thread
    except KeyboardInterrupt:
        interrupted = True
    bugs = [e for e in errors.values() if not isinstance(e, GemmlabError)]
    if bugs and not interrupted:
        raise bugs[0]
    doc = next((d for d in docs if d is not None), None)
    if doc is None:
        if interrupted:
            raise KeyboardInterrupt
        raise next(iter(errors.values()))
    doc = dict(doc, gpus=n)
    if errors:
        doc["fault"] = "; ".join(f"GPU {g}: {e.message}" for g, e in sorted(errors.items()))
    for d in docs:
        if d is not None and d.get("interrupted"):
            interrupted = True
        for note in (d or {}).get("notes", []):
            if note not in doc.get("notes", []):
                doc["notes"] = doc.get("notes", []) + [note]
    if interrupted:
        doc["interrupted"] = True
    with lock:
        return doc, order(list(got))


def sweep(v: Variant, valid: list[dict], shape: Shape, opts: Options, reporter: Reporter,
          out_path: Path | None = None, fresh: bool = False, compile_jobs: int | None = None,
          record: bool = True, about: dict | None = None, team=None) -> tuple[dict, list[dict]]:
    """Every configuration in `valid` (grid.grid's), fastest first, cuBLAS last. What the history already
    has for this GPU, shape, input type and rendered source is taken from it, not measured again (unless
    fresh); the rest is compiled in parallel first (into the cache), then measured. `about`: more keys
    for the document (what was swept, what was skipped). team (gemmlab/spread.py): this rank's share of
    the configurations; rank 0 gets every rank's rows, fastest first, and each rank's cuBLAS last."""
    from .grid import compile_all

    def work(mine, lead):
        known = []  # history rows of configurations measured before on this GPU and shape

        def jobs(dev):
            todo = []
            for params in mine:
                rendered = render(v, params)
                h = None if fresh else history.measured(dev.name, source_hash(rendered.source), shape, opts.dtype)
                if h:
                    known.append(h)
                else:
                    todo.append((params, rendered))
            compile_all([r for _, r in todo], dev.arch, compile_jobs)
            return [(v, params) for params, _ in todo]

        doc, rows, _ = measure("sweep", jobs, shape, opts, reporter, out_path if lead else None, keep_going=True,
                               total=len(mine), record=record and lead, defer=not lead)
        cublas = next((r for r in rows if metrics.is_reference(r)), None)
        peak = doc["device"]["peak_tflops"][opts.dtype] * 1e12
        rows = [r for r in rows if r is not cublas] + [records.row_from_history(h, peak, cublas and cublas["ms"])
                                                       for h in known]
        return doc, order(rows + ([cublas] if cublas else []))

    def order(rows):  # fastest first, those without a time after them, cuBLAS last (each rank's, by rank)
        return sorted(rows, key=lambda r: (metrics.is_reference(r), metrics.is_reference(r) or r["ms"] is None,
                                           0 if metrics.is_reference(r) else r["ms"] or 0, r.get("rank", 0)))

    doc, rows = spread_over(team, "sweep", valid, work, order, reporter, record, opts.timeout)
    if doc.get("rank", 0) == 0:
        doc.update(about or {})
        _save(out_path, doc, rows)
    return doc, rows


def save_best(doc: dict, rows: list[dict], shape: Shape, reporter: Reporter) -> dict | None:
    """Put a sweep's fastest passing row into the tuning cache `auto` reads, unless the cache has a faster
    one for this GPU and shape. The row saved, or None."""
    from .results.tuning import path as cache_path, save_best as save
    best = next((r for r in rows if not metrics.is_reference(r) and r["status"] == "PASS"), None)
    if best is None:
        return None
    kept = save(doc["device"]["name"], shape, best)
    if kept is None:
        reporter.note(f"best {best['variant']} {records.params_text(best['params'])} saved for {shape} in {cache_path()}")
        return best
    reporter.note(f"not saved: the tuning cache's {kept['variant']} {records.params_text(kept['params'])} "
                  f"({kept['ms']:.4f} ms) is faster than {best['ms']:.4f} ms for {shape}")
    return None


def over_shapes(command: str, shapes: list[Shape], auto: bool, named: list[Variant], cat: Catalog, opts: Options,
                add, reporter: Reporter, out_path: Path | None = None, record: bool = True,
                about: dict | None = None, defer: bool = False) -> dict:
    """Run the variants (at their defaults; auto chosen per shape) and cuBLAS on each shape in turn, one
    worker per shape since the inputs differ. add(shape, doc, rows) gives the rows to keep (auto's row
    says chosen_by = "auto"); with out_path the results so far are saved after each shape, with `about`
    in the document (what a file cut short must still say). Ctrl-C stops after the shape in flight. The
    document, its rows included."""
    doc, rows, said = None, [], set()
    for i, shape in enumerate(shapes):
        reporter.phase(f"shape {i + 1} of {len(shapes)}: {shape}")
        choose = auto_jobs(cat, shape, reporter, opts.dtype, opts.out_dtype) if auto else (lambda dev: [])
        fixed = [(v, v.resolve(v.for_dtype(opts.dtype, None, opts.out_dtype))) for v in named]
        d, got, _ = measure(command, lambda dev, choose=choose, fixed=fixed: choose(dev) + fixed,
                            shape, opts, reporter, keep_going=True, record=record, said=said, defer=defer)
        if auto and got and not metrics.is_reference(got[0]):
            got[0]["chosen_by"] = "auto"
        doc = doc or dict(d, **(about or {}))
        if said - set(doc.get("notes", [])):  # each note once, from whichever shape gave it
            doc["notes"] = doc.get("notes", []) + sorted(said - set(doc.get("notes", [])))
        rows += add(shape, d, got)
        if d.get("interrupted"):
            doc["interrupted"] = True
            break
        if out_path:
            write_atomic(out_path, dump(dict(doc, rows=rows)))
    doc.pop("shape", None)
    doc.update(command=command, rows=rows)
    return doc


def on_gpu(request: tuple, what: str, reporter: Reporter, gpu: int | None = None):
    """(device, answer) for one request to a worker that needs no GEMM inputs (bandwidth, occupancy), on
    the `gpu`-th GPU of this host (default: the current one)."""
    from .worker import SETUP_TIMEOUT_S, Isolated
    reporter.phase(what)
    with Isolated("gemmlab.worker:GpuJobs", (Shape(1, 1, 1), 0, False), SETUP_TIMEOUT_S, reporter.phase, gpu=gpu) as w:
        return w.start()["device"], w.call(request)


def suite(shapes, auto: bool, named: list[Variant], cat: Catalog, opts: Options, reporter: Reporter,
          out_path: Path | None = None, record: bool = True, team=None) -> dict:
    """A suites.Suite's shapes with auto and/or the named variants and cuBLAS, in opts.dtype: the rows carry
    the roofline columns (suites.annotate), the document the bandwidth, the suite and, per variant, the
    geometric mean, minimum and share of shapes at or above cuBLAS (suites.summary). Another problem's
    (opts.problem) rows carry x cupy instead (suites.annotate_problem), and each its own worker's copy
    bandwidth (% copy), as a run's do. team (gemmlab/spread.py): this rank's share of the shapes, each
    with all its jobs (its x cuBLAS is one GPU's, its roofline that GPU's bandwidth); rank 0 gets every
    rank's rows, in the suite's order."""
    from . import problems, suites
    entries = {str(e.shape): e for e in shapes.entries}
    label = str if opts.problem == "gemm" else problems.get(opts.problem).label
    index = {label(e.shape): i for i, e in enumerate(shapes.entries)}
    about = {"suite": {"name": shapes.name, "description": shapes.description, "source": shapes.source}}

    def work(mine, lead, opts=opts, reporter=reporter, taken=None):
        if opts.problem == "gemm":
            _, bandwidth = on_gpu(("bandwidth",), "measure the copy bandwidth", reporter, opts.device)

            def annotate(shape, d, got):
                peak = d["device"]["peak_tflops"][opts.dtype] * 1e12
                cublas = next((r["tflops"] for r in got if r["variant"] == "cuBLAS"), None)
                return [suites.annotate(r, entries[str(shape)], peak, bandwidth, cublas, opts.dtype) for r in got]
        else:
            def annotate(shape, d, got):
                return [suites.annotate_problem(r, entries[str(shape)], opts.problem) for r in got]

        def add(shape, d, got):
            rows = annotate(shape, d, got)
            if taken:
                taken(rows)
            return rows

        doc = over_shapes("suite", [e.shape for e in mine], auto, named, cat, opts, add, reporter,
                          out_path if lead and not taken else None, record and lead, about, defer=not lead)
        if opts.problem == "gemm":
            doc["bandwidth_tbs"] = bandwidth / 1e12
        return doc, doc["rows"]

    def order(rows):  # the suite's shapes in its order, each with its rows as its rank gave them
        return sorted(rows, key=lambda r: index.get(r["shape"], len(index)))

    if team is None and opts.gpus > 1 and len(shapes.entries) > 1:
        doc, rows = deal_over_gpus(opts.gpus, shapes.entries, lambda share, gpu, rep, taken: work(
            share, True, replace(opts, gpus=1, device=gpu), rep, taken)[0], order, reporter)
    else:
        doc, rows = spread_over(team, "suite", shapes.entries, work, order, reporter, record, opts.timeout)
    doc["rows"] = rows
    if doc.get("rank", 0) != 0:
        return doc
    doc["summary"] = suites.summary(doc["rows"])
    if out_path:
        write_atomic(out_path, dump(doc))
    return doc


def scaling(sizes: list[int], auto: bool, named: list[Variant], cat: Catalog, opts: Options, reporter: Reporter,
            numpy: bool = False, record: bool = True) -> dict:
    """Squares of each size with the variants and cuBLAS (and numpy.matmul on the CPU with numpy)."""
    from .cpu import numpy_row

    def add(shape, d, got):
        cpu = [numpy_row(shape.M, shape.N, shape.K)] if numpy else []
        return [dict(r, size=shape.M) for r in got + cpu]

    return over_shapes("scaling", [Shape(n, n, n) for n in sizes], auto, named, cat, opts, add, reporter,
                       record=record)
