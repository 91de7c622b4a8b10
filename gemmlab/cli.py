"""The `gemmlab` command: parse, call the pipeline's stages, print. No logic of its own.

Every error a user can cause is a GemmlabError: printed as one red message, exit status 1.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
import re
import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.syntax import Syntax

from . import __version__, history

from .present import export, fit, markdown, tables

from .results import metrics, records
from .api import catalog, default_arch
from .compile import compile_rendered, sass
from .errors import GemmlabError
from .jobs import DEFAULT_TIMEOUT_S
from .render import render
from .sanitize import TOOLS as SANITIZERS
from .templates import DTYPES, NAME_RE, SUFFIX, default_user_dir, load_variant, show_value, user_dirs


class _Seconds(click.FloatRange):
    """A time limit: a positive, finite number of seconds. FloatRange alone lets NaN through (every comparison
    with it is false) and infinity, which the worker cannot wait for: a usage error here instead."""

    def convert(self, value, param, ctx):
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds.", param, ctx)
        return seconds


SECONDS = _Seconds(min=0, min_open=True)


def _console(stderr: bool = False) -> Console:
    """Made at use time, so it writes to whatever stdout/stderr is then (a pipe, a test's buffer).
    A terminal sets the width (tables fit it: fit.FitTable); a pipe or file gets 200 columns, or
    $COLUMNS; --wide prints every column of a table however wide it is."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", 200))
    ctx = click.get_current_context(silent=True)
    if not stderr and ctx is not None and ctx.meta.get("wide"):
        width = WIDE
    return Console(file=stream, highlight=False, width=width)


WIDE = 10_000  # the console width under --wide: no table is cut or folded for lack of room


def out() -> Console:
    return _console()


def err() -> Console:
    return _console(stderr=True)


class Cli(click.Group):
    """Turns GemmlabError (and the few library errors a user can provoke) into one clear message; and
    click's usage errors (usage, "Try --help" and the error: three lines) into one line, exit status 2."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as e:
            _usage_error(e)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GemmlabError as e:
            _fail(ctx, e.message, e.hint)
        except click.UsageError as e:
            _usage_error(e)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except MemoryError:
            _fail(ctx, "out of host memory")
        except BrokenPipeError:  # `gemmlab list | head`: the reader has all it wants
            sys.stderr = open(os.devnull, "w")
            ctx.exit(0)
        except OSError as e:  # a place that cannot be written or read: the user's to fix, not a bug
            if os.environ.get("GEMMLAB_DEBUG"):
                raise
            where = f" {e.filename}" if e.filename else ""
            _fail(ctx, f"cannot use{where}: {e.strerror or e}",
                  "choose a place you can write to (GEMMLAB_DEBUG=1 shows where this came from)")
        except Exception as e:
            if type(e).__name__ == "OutOfMemoryError":  # cupy's, raised where we did not predict it
                _fail(ctx, f"out of GPU memory: {e}", "choose a smaller shape")
            if os.environ.get("GEMMLAB_DEBUG"):
                raise
            _fail(ctx, f"internal error ({type(e).__name__}): {e}",
                  "this is a gemmlab bug; rerun with GEMMLAB_DEBUG=1 for the traceback")


def _usage_error(e: click.UsageError):
    if isinstance(e, click.exceptions.NoArgsIsHelpError):  # `gemmlab` alone: the help, as click prints it
        raise e
    command = e.ctx.command_path if e.ctx else "gemmlab"
    err().print(f"[bold red]error:[/] {escape(e.format_message())} [dim](see {escape(command)} --help)[/]",
                soft_wrap=True)
    raise click.exceptions.Exit(2)


def _fail(ctx, message: str, hint: str | None = None):
    # Messages carry compiler output and template text ("As[ty][k]"): escape them, they are not markup.
    err().print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    if hint:
        err().print(f"[dim]{escape(hint)}[/]", soft_wrap=True)
    ctx.exit(1)


def _note(msg: str | None):
    if msg:
        err().print(f"[yellow]note:[/] {escape(msg)}")


# ---------------------------------------------------------------------------- shared options

def kernels_dir_option(f):
    return click.option("--kernels-dir", "kernels_dirs", multiple=True, type=click.Path(file_okay=False),
                        help="A directory of user templates (repeatable; also $GEMMLAB_KERNELS). "
                             "A user template shadows the built-in one of the same name.")(f)


def param_options(f):
    f = click.option("-p", "--param", "raw_params", multiple=True, metavar="NAME=VALUE",
                     help="Set any template parameter (repeatable).")(f)
    f = click.option("--reg", type=int, help="Shorthand for -p REG=N.")(f)
    f = click.option("--tile", type=int, help="Shorthand for -p TILE=N.")(f)
    return f


rounds_option = click.option(
    "--rounds", type=click.IntRange(min=1), default=1, show_default=True,
    help="Measure cuBLAS and every kernel this many times, taking turns in alternating order, and report "
         "each one's median: clock drift under the power cap then touches all alike.")


def shape_options(f):
    f = click.option("-K", "k", type=click.IntRange(min=1), help="K (overrides --size).")(f)
    f = click.option("-N", "n", type=click.IntRange(min=1), help="N (overrides --size).")(f)
    f = click.option("-M", "m", type=click.IntRange(min=1), help="M (overrides --size).")(f)
    f = click.option("--size", type=click.IntRange(min=1), default=4096, show_default=True,
                     help="M = N = K.")(f)
    f = click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True,
                     help="Least number of timed repetitions (more are run to fill 100 ms).")(f)
    f = rounds_option(f)
    f = click.option("--seed", type=int, help="Seed of the random inputs (default: fresh each run).")(f)
    f = click.option("--check", "check_ref", type=click.Choice(["cupy", "fp64"]), default="cupy",
                     show_default=True, help="Reference: cupy.matmul in FP32, or float64.")(f)
    f = click.option("--timeout", type=SECONDS, default=DEFAULT_TIMEOUT_S,
                     show_default=True, help="Seconds a job may go without progress before its worker is "
                                             "killed and the job marked TIMEOUT.")(f)
    f = click.option("--out", "out_path", type=click.Path(dir_okay=False),
                     help="Also write the results here as JSON, updated after every result (a new file).")(f)
    return dtype_option(output_options(f))


def dtype_option(f):
    return click.option("--dtype", type=click.Choice(DTYPES),
                        help="Input type: fp32 (CUDA cores), or tf32, fp16, bf16 (tensor cores; C is fp32). "
                             "Default: the variant's first type (compare: the first named variant's, "
                             "else fp32).")(f)


def _set_wide(ctx, param, value):
    if value:
        ctx.meta["wide"] = True


def output_options(f):
    f = click.option("--wide", is_flag=True, expose_value=False, callback=_set_wide,
                     help="Print every column of a table, however wide (else columns are folded or left "
                          "out, least important first, to fit the terminal).")(f)
    f = click.option("--csv", "as_csv", is_flag=True, help="Print CSV instead of a table.")(f)
    f = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)
    return f


def output_format(as_json: bool, as_csv: bool, markdown: bool = False) -> str:
    """The one output format asked for; two at once is an error, not a silent choice."""
    asked = [name for name, on in (("--json", as_json), ("--csv", as_csv), ("--markdown", markdown)) if on]
    if len(asked) > 1:
        raise GemmlabError(f"{' and '.join(asked)} do not go together: choose one output format")
    return asked[0][2:] if asked else "table"


def overrides(tile, reg, raw_params) -> dict:
    """The parameters set on the command line. The same one set twice to different values (-p TILE=16
    -p TILE=32, or --tile 16 -p TILE=32) is an error: there is no right one to pick."""
    out_ = {}
    for item in raw_params:
        if "=" not in item:
            raise GemmlabError(f"-p takes NAME=VALUE, not '{item}'")
        k, v = (s.strip() for s in item.split("=", 1))
        if k in out_ and out_[k] != v:
            raise GemmlabError(f"-p {k}={out_[k]} and -p {k}={v} disagree: set {k} once")
        out_[k] = v
    for flag, k, value in (("--tile", "TILE", tile), ("--reg", "REG", reg)):
        if value is None:
            continue
        if k in out_ and out_[k] != str(value):
            raise GemmlabError(f"{flag} {value} and -p {k}={out_[k]} disagree: set {k} once")
        out_[k] = value
    return out_


def names_list(text: str, option: str) -> list[str]:
    """`a,b,c` as a list; an empty list or an empty name (`a,,b`) is an error rather than skipped."""
    names = [x.strip() for x in text.split(",")]
    if not any(names) or not all(names):
        raise GemmlabError(f"{option} takes names separated by commas, not {text!r}",
                           hint=f"for example {option} tiled,regblock")
    return names


def make_shape(size, m, n, k):
    from .results.model import Shape
    return Shape(m or size, n or size, k or size)


def _new_file(path, option: str) -> Path | None:
    """A file gemmlab will write: it must not exist yet (nothing the user has is overwritten)."""
    if not path:
        return None
    path = Path(path)
    if path.exists():
        raise GemmlabError(f"{path} already exists; gemmlab does not overwrite it",
                           hint=f"choose a new file name for {option}")
    if not path.parent.is_dir():
        raise GemmlabError(f"{option} {path}: no such directory {path.parent}")
    try:  # now, not after a long run: can a file be made there?
        import tempfile
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GemmlabError(f"{option} {path}: cannot write in {path.parent} ({e.strerror})",
                           hint=f"choose a file for {option} in a directory you can write to") from None
    return path


def _spinner(*columns) -> Progress:
    """A transient progress line on stderr: what runs now, and for how long."""
    console = err()  # where stderr is no terminal (a pipe, a test), no progress line: it would leave blank lines
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), *columns, TimeElapsedColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


SANITIZE_SHAPE = (257, 131, 97)  # odd, and more than one tile in every direction: the edges get exercised


def _common(ctx, c: dict, sanitizing: bool = False):
    """The shape, run options, output format and --out path from the shared options."""
    from .jobs import Options
    fmt = output_format(c["as_json"], c["as_csv"])
    if sanitizing and not any(ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE
                              for p in ("size", "m", "n", "k")):
        m, n, k = SANITIZE_SHAPE
        _note(f"sanitizing at {m}x{n}x{k} (the sanitizer is slow; odd sizes test the edges); "
              "give --size or -M/-N/-K to choose")
    else:
        m, n, k = c["m"] or c["size"], c["n"] or c["size"], c["k"] or c["size"]
    shape = make_shape(None, m, n, k)
    out_path = _new_file(c["out_path"], "--out")
    opts = Options(reps=c["reps"], seed=c["seed"], fp64_check=c["check_ref"] == "fp64", timeout=c["timeout"],
                   dtype=c["dtype"] or "fp32", rounds=c["rounds"])
    return shape, opts, fmt, out_path


# ---------------------------------------------------------------------------- commands

@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="gemmlab")
def cli():
    """gemmlab: write GEMM kernels as CUDA templates, compile them with NVRTC, check them against
    cuBLAS and time them.

    \b
    Start with:  gemmlab list
                 gemmlab compare
                 gemmlab run --variant tiled --tile 32
                 gemmlab show --variant tiled
    """


@cli.command("list")
@dtype_option
@kernels_dir_option
@output_options
def list_cmd(dtype, kernels_dirs, as_json, as_csv):
    """The variants, in ladder order, with their idea, parent, input types and parameters."""
    cat = catalog(kernels_dirs)
    fmt = output_format(as_json, as_csv)
    ladder = [v for v in cat.ladder() if dtype is None or dtype in v.dtypes]
    # The templates that do not load are listed too (as the table shows them), with why: broken = true.
    broken = [{"name": name, "broken": True, "error": e.message} for name, e in cat.broken.items()]
    if fmt == "json":
        click.echo(export.dump([{"name": v.name, "parent": v.parent, "idea": v.idea, "dtypes": list(v.dtypes),
                                 "source": str(v.path),
                                 "user": not v.builtin, "shadows": str(v.shadows) if v.shadows else None,
                                 "params": {n: {"default": p.default, "choices": p.choices, "help": p.help}
                                            for n, p in v.params.items()}, "broken": False} for v in ladder]
                               + broken))
        return
    if fmt == "csv":
        click.echo(export.csv_text([{"name": v.name, "parent": v.parent, "idea": v.idea, "dtypes": " ".join(v.dtypes),
                                     "defaults": v.defaults(), "source": str(v.path), "user": not v.builtin,
                                     "broken": False, "error": None}
                                    for v in ladder] + broken), nl=False)
        return
    out().print(tables.variants_table(ladder, cat.broken, "gemmlab variants (ladder order)"
                                      + (f", {dtype} only" if dtype else "")))


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
            export.write_atomic(self.out_path, export.dump(dict(doc, rows=rows or self.rows)))


def _run_rows(command, jobs, shape, opts, out_path=None, with_cublas=True, keep_going=False, total=None):
    """Check and time each (variant, params) on one set of inputs, cuBLAS first, in a worker process
    (see jobs.py). With keep_going, a variant that does not build becomes an ERROR row. `total`: the
    number of jobs, for a progress bar."""
    from .jobs import run_jobs
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


def _print_rows(doc, rows, fmt, table):
    if fmt == "json":
        click.echo(export.dump(doc))
    elif fmt == "csv":
        click.echo(export.csv_text(rows), nl=False)
    else:
        out().print(table())


def _sanitize(v, params, shape, opts, tool, fmt):
    from .sanitize import sanitize
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
            from .present.plots import error_map_plot
            error_map_plot(r, Path(plot_path))
            _note(f"wrote {plot_path}")


def _watch(path: Path, once) -> None:
    """Run `once`, then again each time `path` changes, until Ctrl-C."""
    from .watch import wait_for_change
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
    from .results.model import Shape
    from .worker import GPU_JOBS, SETUP_TIMEOUT_S, Isolated
    with _spinner() as progress:
        task = progress.add_task("look for a GPU")
        with Isolated(GPU_JOBS, (Shape(1, 1, 1), 0, False), SETUP_TIMEOUT_S,
                      lambda text: progress.update(task, description=escape(text))) as w:
            w.start()


def _auto_jobs(kernels_dirs, shape):
    """`--variant auto`: the choice needs the GPU (its name for the tuning cache, its SM count), so it
    is made once the worker has said which GPU it has."""
    from .tuning import choose

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
    from . import sweep as grids
    from .jobs import source_hash
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
        from .tuning import path as cache_path, save_best as save
        kept = save(doc["device"]["name"], shape, best)
        if kept is None:
            _note(f"best {best['variant']} {records.params_text(best['params'])} saved for {shape} in {cache_path()}")
        else:
            _note(f"not saved: the tuning cache's {kept['variant']} {records.params_text(kept['params'])} "
                  f"({kept['ms']:.4f} ms) is faster than {best['ms']:.4f} ms for {shape}")
    _plot("sweep_plot", doc, plot_path)
    ctx.exit(status)


def _on_gpu(request: tuple, what: str):
    """(device, answer) for one request to a worker that needs no GEMM inputs (bandwidth, occupancy)."""
    from .results.model import Shape
    from .worker import SETUP_TIMEOUT_S, Isolated
    with _spinner() as progress:
        task = progress.add_task(what)
        with Isolated("gemmlab.worker:GpuJobs", (Shape(1, 1, 1), 0, False), SETUP_TIMEOUT_S,
                      lambda text: progress.update(task, description=escape(text))) as w:
            return w.start()["device"], w.call(request)


def _variants(csv_names: str, kernels_dirs) -> tuple[bool, list]:
    """(whether auto is asked for, the named variants): unknown names fail here, before any GPU work."""
    names = names_list(csv_names, "--variants")
    cat = catalog(kernels_dirs)
    return "auto" in names, [cat.get(n) for n in names if n != "auto"]


def _over_shapes(command, shapes, auto, named, kernels_dirs, opts, add, out_path=None) -> dict:
    """Run the variants (at their defaults, auto chosen per shape) and cuBLAS on each shape in turn,
    one worker per shape since the inputs differ. add(shape, doc, rows) gives the rows to keep; with
    out_path the results so far are saved after each shape. Ctrl-C stops after the shape in flight."""
    doc, rows = None, []
    for shape in shapes:
        choose = _auto_jobs(kernels_dirs, shape) if auto else (lambda dev: [])
        d, got, _ = _run_rows(command, lambda dev, choose=choose: choose(dev) + [(v, v.resolve()) for v in named],
                              shape, opts, keep_going=True)
        doc = doc or d
        rows += add(shape, d, got)
        if d.get("interrupted"):
            doc["interrupted"] = True
            break
        if out_path:
            export.write_atomic(out_path, export.dump(dict(doc, rows=rows)))
    doc.pop("shape", None)
    doc.update(command=command, rows=rows)
    return doc


def _plot(name: str, doc: dict, path: Path | None) -> None:
    if path:
        from .present import plots
        getattr(plots, name)(doc, path)
        _note(f"plot written to {path}")


@cli.command()
@click.option("--variants", default="auto", show_default=True,
              help="Comma-separated variants to run on every shape (auto: chosen per shape).")
@click.option("--only", metavar="MxNxK,...", help="Only these shapes of the suite.")
@click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True, help="Least timed repetitions.")
@rounds_option
@click.option("--seed", type=int, help="Seed of the random inputs.")
@click.option("--timeout", type=SECONDS, default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Seconds a job may go without progress before it is marked TIMEOUT.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Also write the results here as JSON (a new file).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw the roofline with every result (PNG).")
@output_options
@kernels_dir_option
@click.pass_context
def suite(ctx, variants, only, reps, rounds, seed, timeout, out_path, plot_path, as_json, as_csv, kernels_dirs):
    """The 12 shapes of the MIT 6.S894 lab against cuBLAS: roofline bound, % of it, the course's targets."""
    from . import suite as lab
    from .jobs import Options
    from .results.model import Shape
    fmt = output_format(as_json, as_csv)
    out_path, plot_path = _new_file(out_path, "--out"), _new_file(plot_path, "--plot")
    shapes = [(Shape(*s), t) for s, t in lab.SHAPES]
    if only is not None:
        wanted = set(names_list(only, "--only"))
        shapes = [(s, t) for s, t in shapes if str(s) in wanted]
        if len(shapes) != len(wanted):
            raise GemmlabError("--only names shapes that are not in the suite; it has: "
                               + ", ".join(str(Shape(*s)) for s, _ in lab.SHAPES))
    auto, named = _variants(variants, kernels_dirs)
    opts = Options(reps=reps, rounds=rounds, seed=seed, timeout=timeout)
    _, bandwidth = _on_gpu(("bandwidth",), "measure the copy bandwidth")
    targets = {str(s): t for s, t in shapes}

    def add(shape, d, got):
        peak = d["device"]["peak_fp32_tflops"] * 1e12
        cublas = next((r["tflops"] for r in got if r["variant"] == "cuBLAS"), None)
        return [lab.annotate(r, shape, targets[str(shape)], peak, bandwidth, cublas) for r in got]

    doc = _over_shapes("suite", [s for s, _ in shapes], auto, named, kernels_dirs, opts, add, out_path)
    rows = doc["rows"]
    doc["bandwidth_tbs"] = bandwidth / 1e12
    if out_path:
        export.write_atomic(out_path, export.dump(doc))
    _print_rows(doc, rows, fmt, lambda: tables.suite_table(doc))
    _plot("roofline_plot", doc, plot_path)
    bad = records.failures(rows)
    for r in bad:
        err().print(f"[bold red]{r['status']}[/] {escape(r['variant'])} at {r['shape']}: {escape(records.failure_text(r))}",
                    soft_wrap=True)
    ctx.exit(130 if doc.get("interrupted") else 1 if bad else 0)


@cli.command()
@click.option("--variants", default="auto", show_default=True, help="Comma-separated variants (auto: chosen per size).")
@click.option("--sizes", default="256,512,1024,2048,4096", show_default=True, help="Square sizes N (M = N = K).")
@click.option("--backend", "backends", multiple=True, type=click.Choice(["numpy"]),
              help="Also time this CPU baseline (numpy: numpy.matmul in FP32).")
@click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True, help="Least timed repetitions.")
@click.option("--timeout", type=SECONDS, default=DEFAULT_TIMEOUT_S, show_default=True,
              help="Seconds a job may go without progress before it is marked TIMEOUT.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw GFLOP/s against N (PNG, log-log).")
@output_options
@kernels_dir_option
@click.pass_context
def scaling(ctx, variants, sizes, backends, reps, timeout, plot_path, as_json, as_csv, kernels_dirs):
    """GFLOP/s against size for variants, cuBLAS and (--backend numpy) the CPU."""
    from .cpu import numpy_row
    from .jobs import Options
    fmt = output_format(as_json, as_csv)
    try:
        ns = sorted({int(x) for x in names_list(sizes, "--sizes")})
    except ValueError:
        raise GemmlabError(f"--sizes takes integers separated by commas, not '{sizes}'") from None
    if not ns or ns[0] < 1:
        raise GemmlabError("--sizes needs at least one positive size")
    plot_path = _new_file(plot_path, "--plot")
    auto, named = _variants(variants, kernels_dirs)
    opts = Options(reps=reps, timeout=timeout)

    def add(shape, d, got):
        cpu = [numpy_row(shape.M, shape.N, shape.K)] if "numpy" in backends else []
        return [dict(r, size=shape.M) for r in got + cpu]

    doc = _over_shapes("scaling", [make_shape(n, None, None, None) for n in ns], auto, named, kernels_dirs, opts, add)
    rows = doc["rows"]
    _print_rows(doc, rows, fmt, lambda: tables.scaling_table(doc))
    _plot("scaling_plot", doc, plot_path)
    bad = records.failures(rows)
    ctx.exit(130 if doc.get("interrupted") else 1 if bad else 0)


@cli.command()
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw bandwidth against warps per SM (PNG).")
@output_options
def occupancy(plot_path, as_json, as_csv):
    """Copy bandwidth against warps per SM (forced with reserved shared memory), and Little's law."""
    from . import occupancy as occ
    fmt = output_format(as_json, as_csv)
    plot_path = _new_file(plot_path, "--plot")
    dev, rows = _on_gpu(("occupancy",), "copy bandwidth against warps per SM")
    peak = max(r["bandwidth"] for r in rows)
    for r in rows:
        r.update(gbs=r["bandwidth"] / 1e9, pct_of_best=100 * r["bandwidth"] / peak)
    law = occ.littles_law(rows, dev.sms, peak)
    doc = dict(records.meta("occupancy", dev), rows=rows, littles_law=law)
    _print_rows(doc, rows, fmt, lambda: tables.occupancy_table(doc))
    if fmt == "table" and law:
        out().print(f"Little's law: at 1 warp per SM each warp has {occ.BYTES_IN_FLIGHT_PER_WARP} bytes in flight, so the "
                    f"memory latency is about {law['latency_ns']:.0f} ns; {peak / 1e12:.2f} TB/s then needs "
                    f"{law['bytes_in_flight'] / 2**20:.1f} MiB in flight: about {law['warps_per_sm_needed']} warps per SM.")
    _plot("occupancy_plot", doc, plot_path)


@cli.command("profile")
@click.option("--variant", "-v", "name", required=True, help="The variant to profile.")
@param_options
@click.option("--size", type=click.IntRange(min=1), default=4096, show_default=True, help="M = N = K.")
@click.option("-M", "m", type=click.IntRange(min=1), help="M (overrides --size).")
@click.option("-N", "n", type=click.IntRange(min=1), help="N (overrides --size).")
@click.option("-K", "k", type=click.IntRange(min=1), help="K (overrides --size).")
@output_options
@dtype_option
@kernels_dir_option
def profile_cmd(name, tile, reg, raw_params, size, m, n, k, dtype, as_json, as_csv, kernels_dirs):
    """One launch of a variant under ncu: throughput, occupancy, bank conflicts, stalls, DRAM bytes."""
    from .profile import profile
    fmt = output_format(as_json, as_csv)
    v = catalog(kernels_dirs).get(name)
    params = v.resolve(v.for_dtype(dtype, overrides(tile, reg, raw_params)))  # bad input fails here, not under ncu
    shape = make_shape(size, m, n, k)
    args = ["--variant", v.name, "-M", str(shape.M), "-N", str(shape.N), "-K", str(shape.K), "--timeout", "600"]
    args += [a for kv in params.items() for a in ("-p", f"{kv[0]}={show_value(kv[1])}")]
    args += [a for d in kernels_dirs for a in ("--kernels-dir", str(d))]
    with _spinner() as progress:
        progress.add_task(f"ncu: {v.name} {records.params_text(params)} at {shape}")
        found = profile(args)
    found.update(variant=v.name, params=params, shape={"M": shape.M, "N": shape.N, "K": shape.K})
    _print_rows(found, found["metrics"] + [dict(metric="stall: " + s["reason"], value=s["cycles_per_instruction"],
                                                unit="cycles/instruction") for s in found["stalls"]],
                fmt, lambda: tables.profile_table(found))


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


@cli.command("history")
@click.option("--variant", "-v", "name", help="Only this variant's runs.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many runs.")
@click.option("--where", is_flag=True, help="Print where the history is kept, and nothing else.")
@output_options
@click.pass_context
def history_cmd(ctx, name, limit, where, as_json, as_csv):
    """Past runs, newest last: what ran, on what, and how fast."""
    fmt = output_format(as_json, as_csv)
    if where:
        given = [o for o, p in (("--variant", "name"), ("--limit", "limit"))
                 if ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise GemmlabError(f"--where prints where the history is kept; it takes no {' or '.join(given)}")
        if fmt == "table":
            click.echo(str(history.path()))
        else:
            _print_rows({"history": str(history.path())}, [{"history": str(history.path())}], fmt, None)
        return
    rows = history.runs(name, limit)
    if fmt == "table" and not rows:
        err().print(f"[dim]no runs recorded yet in {escape(str(history.path()))}[/]")
        return
    _print_rows({"history": str(history.path()), "rows": rows}, rows, fmt,
                lambda: tables.history_table(rows, f"last {limit} runs" + (f" of {name}" if name else "")
                                             + f" ({history.path()})"))


def _print_code(text: str, lexer: str):
    if sys.stdout.isatty():
        out().print(Syntax(text, lexer, line_numbers=True, word_wrap=False))
    else:
        click.echo(text)


@cli.command()
@click.option("--variant", "-v", "name", required=True, help="The variant to show.")
@param_options
@click.option("--what", type=click.Choice(["source", "ptx", "sass", "resources"]), default="source",
              show_default=True, help="What to show.")
@click.option("--arch", help="Compile for this architecture (e.g. sm_90) instead of the GPU's.")
@dtype_option
@kernels_dir_option
@output_options
def show(name, tile, reg, raw_params, what, arch, dtype, kernels_dirs, as_json, as_csv):
    """The rendered CUDA source, its PTX, its SASS or its resource usage (--json: as a document)."""
    fmt = output_format(as_json, as_csv)
    if fmt == "csv" and what != "resources":
        raise GemmlabError(f"--csv is for --what resources (a table); the {what} is text",
                           hint=f"use --json for the {what} in a JSON document")
    cat = catalog(kernels_dirs)
    v = cat.get(name)
    params = v.resolve(v.for_dtype(dtype, overrides(tile, reg, raw_params)))
    rendered = render(v, params)
    if what == "source":
        if fmt == "json":
            click.echo(export.dump({"variant": v.name, "params": params, "what": what, "text": rendered.source}))
            return
        _print_code(rendered.source, "cuda")
        return
    arch, note = default_arch(arch)
    _note(note)
    compiled = compile_rendered(rendered, arch)
    if what in ("ptx", "sass"):
        text = compiled.ptx if what == "ptx" else sass(compiled)
        if fmt == "json":
            click.echo(export.dump({"variant": v.name, "params": params, "arch": compiled.arch, "what": what,
                                    "text": text}))
            return
        _print_code(text, "text")
    else:
        # compiled.arch: the target it was built for (wgmma's sm_90a where sm_90 was asked for)
        row = dict(variant=v.name, params=params, arch=compiled.arch, threads=v.threads(params),
                   **asdict(compiled.resources), compile_ms=None if compiled.cached else compiled.compile_ms,
                   cached=compiled.cached)
        _print_rows(row, [row], fmt, lambda: tables.resources_table(row))


BUILD_ASK_ABOVE = 500  # configurations: more than this asks first (or needs --yes or --limit)
BUILD_TABLE_ROWS = 100  # more rows than this: one line per variant
BUILD_ERRORS_SHOWN = 20


@cli.command()
@click.option("--variant", "-v", "names", multiple=True,
              help="Variants to build, separated by commas or repeated (default: all).")
@click.option("--arch", help="Architecture (default: the GPU's, else sm_90).")
@click.option("--all-configs", is_flag=True,
              help="Every valid combination of parameter choices (tens of thousands for all variants: "
                   "see --limit).")
@click.option("--limit", type=click.IntRange(min=1),
              help="Build at most N configurations, taken from each variant in turn: its defaults first, "
                   "then the configurations nearest to them.")
@click.option("--yes", "-y", is_flag=True, help=f"Build more than {BUILD_ASK_ABOVE} configurations without asking.")
@click.option("--jobs", "jobs_", type=click.IntRange(min=1), help="Compiles at a time (default: the CPU count).")
@click.option("--no-cache", is_flag=True, help="Compile even when a cached cubin exists.")
@dtype_option
@kernels_dir_option
@output_options
def build(names, arch, all_configs, limit, yes, jobs_, no_cache, dtype, kernels_dirs, as_json, as_csv):
    """Compile variants (no GPU needed): registers, shared memory, spills, compile time. Says how many
    and how long first, compiles in parallel with a progress bar, and asks before a large build."""
    from . import sweep as grids
    from .compile import prune_cache
    fmt = output_format(as_json, as_csv)
    cat = catalog(kernels_dirs)
    names = [n for item in names for n in names_list(item, "--variant")]
    variants = [cat.get(n) for n in names] if names else [v for v in cat.ladder() if dtype is None or dtype in v.dtypes]
    arch, note = default_arch(arch)
    _note(note)
    with _spinner() as progress:
        task = progress.add_task("count the configurations")
        plan = grids.build_plan(variants, lambda v: v.for_dtype(dtype), all_configs, limit,
                                on_count=lambda v: progress.update(
                                    task, description=f"count the valid configurations of {v.name}"))
    jobs = min(jobs_ or os.cpu_count() or 1, max(len(plan), 1))
    duration, basis = _build_estimate(plan, jobs, no_cache)
    count = f"{len(plan):,} configuration{'s' if len(plan) != 1 else ''}"
    if len(plan) > 1:
        n_variants = len({v.name for v, _ in plan})
        err().print(f"[dim]{count} of {n_variants} variant{'s' if n_variants != 1 else ''} for {arch}, "
                    f"{jobs} at a time: up to about {duration} ({basis})[/]")
    if len(plan) > BUILD_ASK_ABOVE and not yes and limit is None:
        question = f"{count} to compile, up to about {duration}"
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise GemmlabError(f"{question}: give --limit N to build N of them (each variant's defaults "
                               "first), or --yes to build them all")
        if not click.confirm(f"{question}: build them all?", default=False, err=True):
            raise GemmlabError("nothing built", hint="--limit N builds N of them, each variant's defaults first")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=err(),
                  transient=True, disable=not err().is_terminal) as progress:
        task = progress.add_task(f"compile for {arch}", total=len(plan))
        rows, interrupted = grids.build_all(plan, arch, use_cache=not no_cache, jobs=jobs,
                                            on_row=lambda row: progress.advance(task))
    prune_cache()  # keep the cache under its size ($GEMMLAB_CACHE_MAX_MB; `gemmlab cache`)
    for name in cat.broken:
        if not names or name in names:
            rows.append({"variant": name, "params": {}, "arch": arch, "result": "FAIL",
                         "error": str(cat.broken[name])})
    many = fmt == "table" and len(rows) > BUILD_TABLE_ROWS
    _print_rows({"command": "build", "arch": arch, "rows": rows}, rows, fmt,
                lambda: tables.build_summary_table(rows, arch) if many else tables.build_table(rows, arch))
    if many:
        out().print(f"[dim]{len(rows):,} configurations, one row per variant: --json or --csv give each one[/]")
    failed = [r for r in rows if r["result"] != "ok"]
    for r in failed[:BUILD_ERRORS_SHOWN]:
        err().print(f"[bold red]error:[/] {escape(r['variant'])} {escape(records.params_text(r['params']))}: "
                    f"{escape(r['error'])}", soft_wrap=True)
    if len(failed) > BUILD_ERRORS_SHOWN:
        err().print(f"[bold red]{len(failed) - BUILD_ERRORS_SHOWN:,} more failed[/] (--json has every error)")
    if interrupted:
        err().print(f"[yellow]interrupted:[/] {len(rows):,} of {len(plan):,} built; those are shown")
        sys.exit(130)
    if failed:
        sys.exit(1)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds // 3600:.0f} h {seconds % 3600 / 60:.0f} min"


def _build_estimate(plan, jobs: int, no_cache: bool) -> tuple[str, str]:
    """About how long the plan takes: each variant's median cold compile from the cache's log of them
    (a guess of 1 s where it has none), over `jobs` processes."""
    import statistics
    from .compile import compile_times
    times = compile_times()
    guess = statistics.median(times.values()) if times else 1000.0
    total_s = sum(times.get(v.name, guess) for v, _ in plan) / 1000 / max(jobs, 1)
    basis = "from this cache's past compiles" if times else "at a guessed 1 s a compile"
    cached = "" if no_cache else "; what the cache has takes no time"
    return _duration(total_s), basis + cached


def _size(n: int | None) -> str:
    if n is None:
        return "none"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


@cli.command("cache")
@click.option("--clear", is_flag=True, help="Remove every compiled kernel from the cache.")
@output_options
def cache_cmd(clear, as_json, as_csv):
    """The compile cache: where it is, how big, its size limit; --clear empties it.

    Cubins are kept in $GEMMLAB_CACHE_DIR (default ~/.cache/gemmlab), keyed by the rendered source,
    the options, the architecture and the NVRTC version. When the cache grows past
    $GEMMLAB_CACHE_MAX_MB (default 2048; 0: no limit), the least recently used entries go."""
    from .compile import CACHE_MAX_ENV, cache_stats, clear_cache
    fmt = output_format(as_json, as_csv)
    doc = dict(cache_stats(), command="cache")
    if clear:
        removed, freed = clear_cache()
        doc.update(cleared_entries=removed, cleared_bytes=freed, entries=0, bytes=0)
    if fmt != "table":
        _print_rows(doc, [doc], fmt, None)
        return
    facts = [("directory", doc["directory"], "$GEMMLAB_CACHE_DIR"),
             ("entries", f"{doc['entries']:,}", "one compiled kernel each"),
             ("size", _size(doc["bytes"]), ""),
             ("size limit", _size(doc["limit_bytes"]), f"${CACHE_MAX_ENV}; past it the least recently used go")]
    if clear:
        facts.insert(1, ("cleared", f"{removed:,} entries, {_size(freed)}", ""))
    out().print(fit.FitTable("gemmlab compile cache", tables.FACT_COLUMNS, facts))


@cli.command()
@click.option("--measure", is_flag=True, help="Also measure copy bandwidth and cuBLAS FP32 rate.")
@output_options
def device(measure, as_json, as_csv):
    """The GPU: SMs, clocks, memory, caches, and how its peaks are computed."""
    from .gpu.device import get_device, measure_copy_bandwidth
    dev = get_device()
    doc = dev.to_json()
    if measure:
        from .gpu.problem import Problem
        from .results.model import Shape
        doc["measured_copy_tbs"] = measure_copy_bandwidth() / 1e12
        r = Problem(Shape(8192, 8192, 8192)).cublas()
        doc["measured_cublas_fp32_tflops"] = r.shape.flops / (r.timing.median_ms * 1e-3) / 1e12
    fmt = output_format(as_json, as_csv)
    doc["command"] = "device"  # so that `gemmlab report` knows a saved one
    _print_rows(doc, [doc], fmt, lambda: tables.device_table(doc))


@cli.command()
@click.argument("name")
@click.option("--from", "source", required=True, help="The variant to copy.")
@click.option("--dir", "dest_dir", type=click.Path(file_okay=False),
              help="Where to write it (default: the first --kernels-dir, $GEMMLAB_KERNELS, or "
                   f"{default_user_dir()}).")
@kernels_dir_option
def new(name, source, dest_dir, kernels_dirs):
    """Copy a variant's template to a user directory as NAME, to edit and rerun."""
    if not NAME_RE.match(name):
        raise GemmlabError(f"'{name}' is not a valid variant name: use letters, digits and _")
    cat = catalog(kernels_dirs)
    v = cat.get(source)
    env_dirs = [d for d in os.environ.get("GEMMLAB_KERNELS", "").split(os.pathsep) if d]
    directory = Path(dest_dir or (kernels_dirs[0] if kernels_dirs else None)
                     or (env_dirs[0] if env_dirs else None) or default_user_dir()).expanduser()
    target = directory / f"{name}{SUFFIX}"
    if target.exists():
        raise GemmlabError(f"{target} already exists; gemmlab never overwrites a template",
                           hint="choose another name, or delete or edit that file")
    text = v.path.read_text()
    text = re.sub(r'^name\s*=\s*"[^"]*"', f'name = "{name}"', text, count=1, flags=re.M)
    parent = v.parent if name == v.name else v.name
    if re.search(r"^parent\s*=", text, flags=re.M):
        text = re.sub(r'^parent\s*=.*$', f'parent = "{parent}"' if parent else "", text, count=1, flags=re.M)
    elif parent:
        text = re.sub(r'^(name\s*=.*)$', rf'\1\nparent = "{parent}"', text, count=1, flags=re.M)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(target, "x") as f:  # "x": fail rather than replace a file that appeared meanwhile
            f.write(text)
    except FileExistsError:
        raise GemmlabError(f"{target} already exists; gemmlab never overwrites a template") from None
    except OSError as e:
        raise GemmlabError(f"cannot write {target}: {e.strerror}",
                           hint="choose a directory you can write to with --dir (or set $GEMMLAB_KERNELS)") from None
    load_variant(target, builtin=False)
    shadow = " (it shadows the built-in one)" if name in cat.variants and cat.variants[name].builtin else ""
    out().print(f"wrote [cyan]{escape(str(target))}[/]{shadow}")
    found = directory.resolve() in {d.resolve() for d in user_dirs()}  # found without a flag
    flag = "" if found else f" --kernels-dir {shlex.quote(str(directory))}"
    out().print(escape(f"edit it, then:  gemmlab run --variant {name}{flag}\n"
                       f"           or:  gemmlab compare --variants {v.name},{name}{flag}"))


def _is_device(doc: dict) -> bool:  # `gemmlab device --json` (older files have no "command")
    return doc.get("command") == "device" or {"sms", "cc", "clock_khz"} <= set(doc)


def _is_profile(doc: dict) -> bool:  # `gemmlab profile --json`
    return isinstance(doc.get("metrics"), list) and isinstance(doc.get("stalls"), list)


def _load_results(path: str, what: str = "a `--json` output") -> dict:
    try:
        doc = json.loads(Path(path).read_text())
        if not isinstance(doc, dict) or not (isinstance(doc.get("rows", doc.get("findings")), list)
                                             or _is_device(doc) or _is_profile(doc)):
            raise TypeError
    except (ValueError, KeyError, TypeError, OSError):
        raise GemmlabError(f"{path} is not a gemmlab results file ({what})") from None
    return doc


@cli.command("report")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the README's markdown table instead.")
@click.option("--versus", metavar="VARIANT", help="One markdown table of VARIANT against cuBLAS over all the files.")
@output_options
def report_cmd(files, as_markdown, versus, as_json, as_csv):
    """Show saved `--json` results again (of any command that writes them): as tables, markdown, or all
    their rows as JSON or CSV."""
    fmt = output_format(as_json, as_csv, as_markdown)
    docs = [_load_results(f) for f in files]
    if versus:
        if fmt in ("json", "csv"):
            raise GemmlabError(f"--versus prints a markdown table; it does not go with --{fmt}")
        if any("shape" not in d or "rows" not in d for d in docs):
            raise GemmlabError("--versus needs `compare --json` files")
        if not any(r["variant"] == versus for d in docs for r in d["rows"]):
            have = sorted({r["variant"] for d in docs for r in d["rows"]} - {"cuBLAS"})
            raise GemmlabError(f"no file has a row of {versus}", hint="they have: " + ", ".join(have))
        click.echo(markdown.versus_markdown(docs, versus))
        return
    if fmt in ("json", "csv"):
        rows = [dict(r, file=f) for f, d in zip(files, docs)
                for r in (d.get("rows", d.get("findings")) or ([d] if _is_device(d) else d.get("metrics", [])))]
        _print_rows(docs[0] if len(docs) == 1 else docs, rows, fmt, None)
        return
    for doc in docs:
        if _is_device(doc) or _is_profile(doc):
            if as_markdown:
                raise GemmlabError("--markdown is for results tables; a device or profile file has none")
            out().print(tables.device_table(doc) if _is_device(doc) else tables.profile_table(doc))
        elif "findings" in doc:  # a `run --sanitize --json` document
            click.echo(markdown.findings_markdown(doc)) if as_markdown else out().print(tables.findings_table(doc))
        elif doc.get("command") in markdown.VIEWS:  # suite, scaling, occupancy: their own columns
            table, md = markdown.VIEWS[doc["command"]]
            click.echo(md(doc)) if as_markdown else out().print(table(doc))
        elif as_markdown:
            click.echo(markdown.markdown(doc))
        else:
            rows = doc["rows"]
            out().print(tables.results_table(rows, tables.title_for(doc),
                                             speedups=bool(rows) and "speedup_prev" in rows[0]))


@cli.command()
@click.option("--results", type=click.Path(exists=True, dir_okay=False),
              help="A saved `compare --json` file: show the measured speed-ups beside the predictions.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the README's markdown table instead.")
@kernels_dir_option
@output_options
def explain(results, as_markdown, kernels_dirs, as_json, as_csv):
    """Walk the ladder: each rung's idea, its prediction, and (with --results) what was measured."""
    fmt = output_format(as_json, as_csv, as_markdown)
    doc = _load_results(results, "a `compare --json` output") if results else None
    rows = markdown.predictions(catalog(kernels_dirs).ladder(), doc)
    if as_markdown:
        click.echo(markdown.predictions_markdown(rows))
        return
    _print_rows({"results": results, "rows": rows}, rows, fmt, lambda: tables.explain_table(rows, results))


def main():
    cli(prog_name="gemmlab")


if __name__ == "__main__":
    main()
