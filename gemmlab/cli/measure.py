"""The commands that measure kernels: run (with --watch, --sanitize, --show-errors), compare, sweep."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from .. import api
from ..api import catalog
from ..errors import GemmlabError
from ..files import new_file
from ..present import tables
from ..results import records
from ..sanitize import TOOLS as SANITIZERS
from .common import (_common, _note, _plot, _print_fault, _print_rows, _reporter, _spinner, cli, err, gpus_option,
                     kernels_dir_option, names_list, out, overrides, param_options, refs_option, shape_options,
                     store_option)
from .problems import gemm_shape_options, problem_of, problem_options, problem_shape, size_given


def _emit(rs, fmt) -> int:
    """Print a ResultSet; return the exit status it calls for (1 if any failed, 130 if interrupted). Under a
    launcher a rank other than 0 prints nothing: its rows went to rank 0, whose table and status are the job's."""
    if not rs.lead:
        return 0
    rows = rs.to_dicts()
    _print_rows(rs.to_json(), rows, fmt, rs.table)
    if fmt == "table" and any(r.get("user") for r in rows):
        out().print("[dim](user) = a template from a user directory[/]")
    if fmt == "table":
        for r in rows:  # a slow row is often a slow clock: say so where NVML saw the clock held down
            if records.clock_note(r):
                out().print(f"[yellow]{escape(r['variant'])}[/]: {escape(records.clock_note(r))}", soft_wrap=True)
    for r in rs.failures:
        err().print(f"[bold red]{r['status']}[/] {escape(r['variant'])} {records.params_text(r['params'])}: "
                    f"{escape(records.failure_text(r))}; its time is not reported", soft_wrap=True)
    _print_fault(rs.meta)
    if rs.interrupted:
        done = len([r for r in rows if r["variant"] not in ("cuBLAS", "cupy")])
        of = f" of {rs.meta['planned']}" if rs.meta.get("planned") else ""
        err().print(f"[yellow]interrupted:[/] {done}{of} measured; those are shown and recorded")
    return rs.exit_status


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
@refs_option
@click.option("--watch", is_flag=True, help="Run again each time the template file changes.")
@click.option("--sanitize", type=click.Choice(SANITIZERS), is_flag=False, flag_value="memcheck",
              help="Run the kernel once under compute-sanitizer (memcheck if no tool is named) instead of "
                   "timing it; small odd shape unless you give one.")
@click.option("--show-errors", is_flag=True, help="If the check fails, draw which tiles of C are wrong.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="If the check fails, also draw the wrong tiles of C as a PNG here.")
@problem_options
@kernels_dir_option
@click.pass_context
def run(ctx, name, tile, reg, raw_params, no_cublas, refs, watch, sanitize, show_errors, plot_path, problem, inputs,
        kernels_dirs, **common):
    """Check one variant against cupy.matmul, then time it (with cuBLAS beside it); a variant of another
    problem (--problem) against its cupy reference."""
    problem = problem_of(problem, [name], kernels_dirs)
    shape, opts, fmt, out_path = _common(ctx, gemm_shape_options(common, problem), sanitizing=bool(sanitize))
    more = {}
    if problem != "gemm":
        if sanitize:
            raise GemmlabError("--sanitize runs GEMM kernels only, for now")
        shape, more = problem_shape(common, problem, size_given(ctx)), {"problem": problem, "inputs": inputs}
    elif inputs is not None:
        raise GemmlabError("--inputs chooses the input set of a problem other than gemm")
    plot_path = new_file(plot_path, "--plot")  # checked now, not after the run
    if sanitize and watch:
        raise GemmlabError("--sanitize and --watch do not go together")
    given = overrides(tile, reg, raw_params)
    if name == "auto" and (sanitize or watch):
        raise GemmlabError("--sanitize and --watch need a named variant, not auto")
    api_args = dict(shape=shape, dtype=common["dtype"], out_dtype=common["out_dtype"], reps=opts.reps,
                    rounds=opts.rounds, seed=opts.seed,
                    check="fp64" if opts.fp64_check else "cupy", timeout=opts.timeout, cublas=not no_cublas,
                    kernels_dirs=kernels_dirs, refs=refs, **more)

    def once() -> int:
        if sanitize:
            v = catalog(kernels_dirs).get(name)
            params = v.resolve(v.for_dtype(common["dtype"], given, common["out_dtype"]))
            opts.dtype, opts.out_dtype = v.dtype(params), v.out_dtype(params)
            return _sanitize(v, params, shape, opts, sanitize, fmt)
        with _reporter() as reporter:  # the template is read again each time: --watch may have changed it
            rs = api.run(name, given, out=out_path, progress=reporter, **api_args)
        status = _emit(rs, fmt)
        _error_maps(rs.rows, show_errors, plot_path)
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


@cli.command()
@click.option("--variant", "-v", "name", required=True, help="The variant to sweep.")
@click.option("--param", "specs", multiple=True, required=True, metavar="NAME=V1,V2|A..B[:STEP]",
              help="Values of one parameter (repeatable: the grid is every combination).")
@shape_options
@click.option("--jobs", "jobs_", type=click.IntRange(min=1), help="Compiles at a time (default: the CPU count).")
@click.option("--fresh", is_flag=True, help="Measure again what the history already has for this GPU and shape.")
@click.option("--save-best", is_flag=True, help="Write the fastest into the tuning cache that --variant auto reads.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw GFLOP/s per configuration (PNG).")
@gpus_option
@store_option
@kernels_dir_option
@click.pass_context
def sweep(ctx, name, specs, jobs_, fresh, save_best, plot_path, gpus, store, kernels_dirs, **common):
    """Time a variant over a grid of parameters, fastest first; skip what its constraints forbid."""
    problem = problem_of(None, [name], kernels_dirs)
    shape, opts, fmt, out_path = _common(ctx, gemm_shape_options(common, problem))
    plot_path = new_file(plot_path, "--plot")
    if problem != "gemm":
        shape = problem_shape(common, problem, size_given(ctx))
    with _reporter() as reporter:
        rs = api.sweep(name, list(specs), shape, dtype=common["dtype"], out_dtype=common["out_dtype"],
                       reps=opts.reps, rounds=opts.rounds,
                       seed=opts.seed, check="fp64" if opts.fp64_check else "cupy", timeout=opts.timeout,
                       out=out_path, fresh=fresh, save_best=save_best, jobs=jobs_, kernels_dirs=kernels_dirs,
                       progress=reporter, gpus=gpus, store=store)
    status = _emit(rs, fmt)
    if rs.lead:
        _plot("sweep_plot", rs.to_json(), plot_path)
    ctx.exit(status)


@cli.command()
@click.option("--variants", help="Comma-separated variants (default: the whole ladder).")
@shape_options
@refs_option
@gpus_option
@store_option
@problem_options
@kernels_dir_option
@click.pass_context
def compare(ctx, variants, refs, gpus, store, problem, inputs, kernels_dirs, **common):
    """The ladder at each variant's defaults, plus cuBLAS, with speed-ups rung over rung (--problem: that
    problem's ladder, beside its cupy reference)."""
    chosen = names_list(variants, "--variants") if variants is not None else None
    problem = problem_of(problem, chosen or [], kernels_dirs)
    shape, opts, fmt, out_path = _common(ctx, gemm_shape_options(common, problem))
    more = {}
    if problem != "gemm":
        shape, more = problem_shape(common, problem, size_given(ctx)), {"problem": problem, "inputs": inputs}
    elif inputs is not None:
        raise GemmlabError("--inputs chooses the input set of a problem other than gemm")
    with _reporter() as reporter:
        rs = api.compare(chosen, shape, dtype=common["dtype"], out_dtype=common["out_dtype"], reps=opts.reps,
                         rounds=opts.rounds, seed=opts.seed,
                         check="fp64" if opts.fp64_check else "cupy", timeout=opts.timeout, out=out_path,
                         kernels_dirs=kernels_dirs, progress=reporter, gpus=gpus, refs=refs, store=store, **more)
    ctx.exit(_emit(rs, fmt))
