"""The commands that measure kernels: run (with --watch, --sanitize, --show-errors), compare, sweep."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn)

from ..results import history

from ..present import export, tables

from ..results import metrics, records
from ..api import catalog
from ..errors import GemmlabError
from ..files import write_atomic
from ..render import render
from ..sanitize import TOOLS as SANITIZERS
from .common import (_common, _new_file, _note, _plot, _print_rows, _spinner, cli, err, kernels_dir_option,
                     names_list, out, overrides, param_options, shape_options)


class _Recorder:
    """Takes each row the moment it is measured: its change against the last run of the same variant
    and shape (from the history), then into the history and, with --out, into that file (atomically)."""

    def __init__(self, out_path: Path | None):
        self.out_path, self.rows, self.warned = out_path, [], False

    def __call__(self, doc: dict, row: dict) -> None:
        prev = None
        try:
            prev = history.record(doc["command"], row, doc["shape"], doc["device"]["name"], doc["commit"],
                                  row.get("dtype", "fp32"))
        except GemmlabError as e:
            if not self.warned:
                _note(f"{e.message}; results are not being recorded")
                self.warned = True
        d = history.delta(row, prev)
        row.update(vs_last=d["vs_last"], vs_last_text=history.delta_text(d), changed=d["changed"],
                   vs_last_noise=d.get("noise"), outside_noise=d.get("outside_noise"))
        self.rows.append(row)
        self.save(doc)

    def save(self, doc: dict, rows: list[dict] | None = None) -> None:
        if self.out_path:
            write_atomic(self.out_path, export.dump(dict(doc, rows=rows or self.rows)))


def _run_rows(command, jobs, shape, opts, out_path=None, with_cublas=True, keep_going=False, total=None):
    """Check and time each (variant, params) on one set of inputs, cuBLAS first, in a worker process
    (see jobs.py). With keep_going, a variant that does not build becomes an ERROR row. `total`: the
    number of jobs, for a progress bar."""
    from ..jobs import run_jobs
    recorder = _Recorder(out_path)
    with _spinner(BarColumn(), MofNCompleteColumn()) as progress:
        task = progress.add_task("", total=total)

        def on_row(doc, row):
            recorder(doc, row)
            if row["variant"] != "cuBLAS":
                progress.advance(task)

        doc, rows = run_jobs(command, jobs, shape, opts, with_cublas=with_cublas, keep_going=keep_going,
                             on_phase=lambda text: progress.update(task, description=escape(text)),
                             on_row=on_row)
    return doc, rows, recorder


def _emit(doc, rows, fmt, speedups, planned: int | None = None) -> int:
    """Print the results; return the exit status they call for (1 if any failed, 130 if interrupted)."""
    doc["rows"] = rows
    _print_rows(doc, rows, fmt, lambda: tables.results_table(rows, tables.title_for(doc), speedups))
    if fmt == "table" and any(r.get("user") for r in rows):
        out().print("[dim](user) = a template from a user directory[/]")
    if fmt == "table":
        for r in rows:  # a slow row is often a slow clock: say so where NVML saw the clock held down
            if records.clock_note(r):
                out().print(f"[yellow]{escape(r['variant'])}[/]: {escape(records.clock_note(r))}", soft_wrap=True)
    bad = records.failures(rows)
    for r in bad:
        err().print(f"[bold red]{r['status']}[/] {escape(r['variant'])} {records.params_text(r['params'])}: "
                    f"{escape(records.failure_text(r))}; its time is not reported", soft_wrap=True)
    if doc.get("interrupted"):
        done = len([r for r in rows if r["variant"] != "cuBLAS"])
        err().print(f"[yellow]interrupted:[/] {done} of {planned} measured; those are shown and recorded")
        return 130
    return 1 if bad else 0


def _sanitize(v, params, shape, opts, tool, fmt):
    from ..sanitize import sanitize
    with _spinner() as progress:
        progress.add_task(f"compute-sanitizer --tool {tool}: {v.name} {records.params_text(params)} at {shape}")
        found = sanitize(v, params, shape, tool, opts)
    rows = found["findings"]
    _print_rows(found, rows, fmt, lambda: tables.findings_table(found))
    check = found["check"]
    if fmt == "table":
        out().print(f"{tool}: {found['summary'] or 'no summary line'}; the result check: "
                    f"{check['status']}" + (f" ({escape(check['error'])})" if check.get("error") else ""))
    return 1 if rows or check["status"] != "PASS" else 0


def _error_maps(rows, show: bool, plot_path) -> None:
    """--show-errors and --plot of `run`: where a failing row's wrong elements are, by tile of C."""
    for r in rows:
        if not r.get("tiles"):
            continue
        if show:
            err().print(tables.error_map(r))
        if plot_path:
            from ..present.plots import error_map_plot
            error_map_plot(r, Path(plot_path))
            _note(f"wrote {plot_path}")


def _watch(path: Path, once) -> None:
    """Run `once`, then again each time `path` changes, until Ctrl-C."""
    from ..watch import wait_for_change
    while True:
        try:
            if once() == 130:
                return
        except GemmlabError as e:  # a broken edit: say so and wait for the next one
            err().print(f"[bold red]error:[/] {escape(e.message)}", soft_wrap=True)
        err().print(f"[dim]watching {escape(str(path))} for changes (Ctrl-C to stop)[/]")
        try:
            wait_for_change(path)
        except KeyboardInterrupt:
            return


@cli.command()
@click.option("--variant", "-v", "name", required=True, help="The variant to run (see `gemmlab list`).")
@param_options
@shape_options
@click.option("--no-cublas", is_flag=True, help="Skip the cuBLAS timing (no % of cuBLAS).")
@click.option("--watch", is_flag=True, help="Run again each time the template file changes.")
@click.option("--sanitize", type=click.Choice(SANITIZERS), is_flag=False, flag_value="memcheck",
              help="Run the kernel once under compute-sanitizer (memcheck if no tool is named) instead of "
                   "timing it; small odd shape unless you give one.")
@click.option("--show-errors", is_flag=True, help="If the check fails, draw which tiles of C are wrong.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="If the check fails, also draw the wrong tiles of C as a PNG here.")
@kernels_dir_option
@click.pass_context
def run(ctx, name, tile, reg, raw_params, no_cublas, watch, sanitize, show_errors, plot_path, kernels_dirs,
        **common):
    """Check one variant against cupy.matmul, then time it (with cuBLAS beside it)."""
    shape, opts, fmt, out_path = _common(ctx, common, sanitizing=bool(sanitize))
    plot_path = _new_file(plot_path, "--plot")  # checked now, not after the run
    if sanitize and watch:
        raise GemmlabError("--sanitize and --watch do not go together")
    given = overrides(tile, reg, raw_params)

    if name == "auto":
        if opts.dtype != "fp32":
            raise GemmlabError("--variant auto chooses among the FP32 kernels", hint="name a tensor-core variant for --dtype")
        if given:
            raise GemmlabError("--variant auto chooses the parameters itself",
                               hint="name a variant to set parameters; `gemmlab run --variant auto` shows its choice")
        if sanitize or watch:
            raise GemmlabError("--sanitize and --watch need a named variant, not auto")
        doc, rows, _ = _run_rows("run", _auto_jobs(kernels_dirs, shape), shape, opts, out_path,
                                 with_cublas=not no_cublas)
        ctx.exit(_emit(doc, rows, fmt, speedups=False, planned=1))

    def once() -> int:
        v = catalog(kernels_dirs).get(name)  # again each time: --watch may have changed the header
        params = v.resolve(v.for_dtype(common["dtype"], given))
        opts.dtype = v.dtype(params)
        if sanitize:
            return _sanitize(v, params, shape, opts, sanitize, fmt)
        render(v, params)  # a template that cannot render is one error before any GPU work (cuBLAS included)
        doc, rows, recorder = _run_rows("run", [(v, params)], shape, opts, out_path, with_cublas=not no_cublas)
        status = _emit(doc, rows, fmt, speedups=False, planned=1)
        _error_maps(rows, show_errors, plot_path)
        return status

    if watch:
        path = catalog(kernels_dirs).get(name).path
        _gpu_or_fail()  # else the no-GPU error is printed and the watch waits for edits that cannot fix it
        _watch(path, once)
    else:
        ctx.exit(once())


def _gpu_or_fail() -> None:
    """Start a worker once to learn that there is a GPU to run on (a GemmlabError if not)."""
    from ..results.model import Shape
    from ..worker import GPU_JOBS, SETUP_TIMEOUT_S, Isolated
    with _spinner() as progress:
        task = progress.add_task("look for a GPU")
        with Isolated(GPU_JOBS, (Shape(1, 1, 1), 0, False), SETUP_TIMEOUT_S,
                      lambda text: progress.update(task, description=escape(text))) as w:
            w.start()


def _auto_jobs(kernels_dirs, shape):
    """`--variant auto`: the choice needs the GPU (its name for the tuning cache, its SM count), so it
    is made once the worker has said which GPU it has."""
    from ..results.tuning import choose

    def jobs(dev):
        v, params, how = choose(catalog(kernels_dirs), dev.name, shape, dev.sms)
        _note(f"auto chose {v.name} {records.params_text(params)} ({how})")
        return [(v, params)]
    return jobs


@cli.command()
@click.option("--variant", "-v", "name", required=True, help="The variant to sweep.")
@click.option("--param", "specs", multiple=True, required=True, metavar="NAME=V1,V2|A..B[:STEP]",
              help="Values of one parameter (repeatable: the grid is every combination).")
@shape_options
@click.option("--jobs", "jobs_", type=click.IntRange(min=1), help="Compiles at a time (default: the CPU count).")
@click.option("--fresh", is_flag=True, help="Measure again what the history already has for this GPU and shape.")
@click.option("--save-best", is_flag=True, help="Write the fastest into the tuning cache that --variant auto reads.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw GFLOP/s per configuration (PNG).")
@kernels_dir_option
@click.pass_context
def sweep(ctx, name, specs, jobs_, fresh, save_best, plot_path, kernels_dirs, **common):
    """Time a variant over a grid of parameters, fastest first; skip what its constraints forbid."""
    from .. import grid as grids
    from ..jobs import source_hash
    shape, opts, fmt, out_path = _common(ctx, common)
    v = catalog(kernels_dirs).get(name)
    opts.dtype = v.dtype(v.resolve(v.for_dtype(common["dtype"])))
    if any(sp.split("=", 1)[0].strip() == "DTYPE" for sp in specs):
        raise GemmlabError("a sweep runs one input type; choose it with --dtype")
    valid, skipped = grids.grid(v, list(specs), fixed=v.for_dtype(opts.dtype))
    for n, why, example in grids.skip_summary(skipped):
        err().print(f"[yellow]skipped {n}:[/] {escape(why)}  [dim](e.g. {escape(example)})[/]", soft_wrap=True)
    if not valid:
        raise GemmlabError(f"no point of the grid satisfies {v.name}'s constraints ({len(skipped)} skipped)")
    plot_path = _new_file(plot_path, "--plot")
    known = []  # (history row) for configurations measured before on this GPU and shape

    def jobs(dev):
        todo = []
        for params in valid:
            rendered = render(v, params)
            h = None if fresh else history.measured(dev.name, source_hash(rendered.source), shape, opts.dtype)
            if h:
                known.append(h)
            else:
                todo.append((params, rendered))
        grids.compile_all([r for _, r in todo], dev.arch, jobs_)  # in parallel, into the cache
        return [(v, params) for params, _ in todo]

    doc, rows, recorder = _run_rows("sweep", jobs, shape, opts, out_path, keep_going=True, total=len(valid))
    cublas = next((r for r in rows if r["variant"] == "cuBLAS"), None)
    peak = doc["device"]["peak_tflops"][opts.dtype] * 1e12
    rows = [r for r in rows if r is not cublas] + [records.row_from_history(h, peak, cublas and cublas["ms"]) for h in known]
    rows.sort(key=lambda r: (r["ms"] is None, r["ms"] or 0))
    rows += [cublas] if cublas else []
    doc["skipped"] = [{"params": typed, "why": why} for typed, why in skipped]
    doc["swept"] = [grids.parse_spec(sp)[0] for sp in specs]
    recorder.save(doc, rows)
    status = _emit(doc, rows, fmt, speedups=False, planned=len(valid))
    best = next((r for r in rows if r["variant"] != "cuBLAS" and r["status"] == "PASS"), None)
    if save_best and best:
        from ..results.tuning import path as cache_path, save_best as save
        kept = save(doc["device"]["name"], shape, best)
        if kept is None:
            _note(f"best {best['variant']} {records.params_text(best['params'])} saved for {shape} in {cache_path()}")
        else:
            _note(f"not saved: the tuning cache's {kept['variant']} {records.params_text(kept['params'])} "
                  f"({kept['ms']:.4f} ms) is faster than {best['ms']:.4f} ms for {shape}")
    _plot("sweep_plot", doc, plot_path)
    ctx.exit(status)


@cli.command()
@click.option("--variants", help="Comma-separated variants (default: the whole ladder).")
@shape_options
@kernels_dir_option
@click.pass_context
def compare(ctx, variants, kernels_dirs, **common):
    """The ladder at each variant's defaults, plus cuBLAS, with speed-ups rung over rung."""
    shape, opts, fmt, out_path = _common(ctx, common)
    cat = catalog(kernels_dirs)
    if variants is not None:
        chosen = [cat.get(x) for x in names_list(variants, "--variants")]
        opts.dtype = common["dtype"] or (chosen[0].dtypes[0] if chosen else "fp32")  # wgmma,wgmma_ws: bf16
    else:  # the ladder of this input type
        chosen = [v for v in cat.ladder() if opts.dtype in v.dtypes]
    if not chosen:
        raise GemmlabError("no variants to compare")
    jobs = [(v, v.resolve(v.for_dtype(opts.dtype))) for v in chosen]
    doc, rows, recorder = _run_rows("compare", jobs, shape, opts, out_path, keep_going=True)
    metrics.add_speedups(rows)
    recorder.save(doc, rows)
    ctx.exit(_emit(doc, rows, fmt, speedups=True, planned=len(jobs)))
