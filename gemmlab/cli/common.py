"""What every command shares: the consoles, the option groups, output formats, the command group.

Every error a user can cause is a GemmlabError: printed as one red message, exit status 1 (usage
errors 2)."""

from __future__ import annotations

import json
from contextlib import contextmanager
import math
import os
import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from .. import __version__

from ..present import export

from ..errors import GemmlabError
from ..files import new_file
from ..jobs import DEFAULT_TIMEOUT_S
from ..results.records import COMMAND_LINE, portable_arg
from ..templates import DTYPES



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

    def make_context(self, info_name, args, *rest, **kwargs):
        # The command line as typed goes into every result file this command writes (records.meta), so a
        # committed result says exactly what made it; through the environment, to the worker processes too.
        line = shlex.join(["gemmlab", *map(portable_arg, args)])
        if "\0" not in line:  # (the environment cannot hold a NUL; such a command fails on its option anyway)
            os.environ[COMMAND_LINE] = line
        try:
            return super().make_context(info_name, args, *rest, **kwargs)
        except click.UsageError as e:
            os.environ.pop(COMMAND_LINE, None)
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
        finally:  # a later call of the Python API in this process is not this command
            os.environ.pop(COMMAND_LINE, None)


def _print_fault(meta: dict) -> None:
    """What stopped a job of several ranks (`fault`: the ranks that failed or did not deliver), if anything."""
    if meta.get("fault"):
        err().print(f"[bold red]error:[/] {escape(meta['fault'])}", soft_wrap=True)


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


def refs_option(f):
    return click.option("--refs", metavar="cublaslt,triton",
                        help="Also check and time these references beside cuBLAS, as its row is: cuBLASLt's "
                             "heuristics' best algorithms autotuned (nvmath-python), Triton's matmul "
                             "(torch.compile, max-autotune). A missing package is a note, not an error.")(f)


rounds_option = click.option(
    "--rounds", type=click.IntRange(min=1), default=1, show_default=True,
    help="Measure cuBLAS and every kernel this many times, taking turns in alternating order, and report "
         "each one's median: clock drift under the power cap then touches all alike.")


def show_options(f):
    """What `show` shows and for which architecture (the CLI's show and the notebook's)."""
    f = click.option("--arch", help="Compile for this architecture (e.g. sm_90) instead of the GPU's.")(f)
    return click.option("--what", type=click.Choice(["source", "ptx", "sass", "resources"]), default="source",
                        show_default=True, help="What to show.")(f)


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
    return dtype_option(out_dtype_option(output_options(f)))


def _gpus(ctx, param, value):
    if value is None:
        return 1
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise click.BadParameter(f"{value!r} is not a number of GPUs (or all)")
    return n


def gpus_option(f):
    return click.option("--gpus", "gpus", metavar="N|all", callback=_gpus,
                        help="One worker per GPU of this host: each job is timed alone on the GPU that takes it "
                             "(a suite's shape goes whole to one GPU, beside its cuBLAS), and the rows come back "
                             "in one table (default: 1).")(f)


def store_option(f):
    return click.option("--store", type=click.Path(dir_okay=False),
                        help="Under a launcher without MPI or torch: a file every rank sees, through which rank 0 "
                             "passes the seed and takes each rank's rows (PATH.rankN, beside it).")(f)


def dtype_option(f):
    return click.option("--dtype", type=click.Choice(DTYPES),
                        help="Input type: fp32 (CUDA cores), or tf32, fp16, bf16, e4m3, e5m2 (tensor cores; C is "
                             "fp32; FP8 with scales: -p SCALE=tensor|row|block). "
                             "Default: the variant's first type (compare: the first named variant's, "
                             "else fp32).")(f)


def out_dtype_option(f):
    return click.option("--out-dtype", type=click.Choice(["fp32", "bf16", "fp16"]),
                        help="C's type: fp32 (the default), or the inputs' own 16-bit type, which halves the bytes "
                             "written (the tensor-core rungs wmma, mma and wgmma*, and cuBLAS).")(f)


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
    from ..results.model import Shape
    return Shape(m or size, n or size, k or size)




def _spinner(*columns):
    """A transient progress line on stderr: what runs now, and for how long."""
    from ..present.progress import spinner
    return spinner(*columns, on=err())


@contextmanager
def _reporter():
    """The progress bar and notes of a measuring command, on stderr."""
    from ..present.progress import bar
    with bar(err()) as reporter:
        yield reporter


SANITIZE_SHAPE = (257, 131, 97)  # odd, and more than one tile in every direction: the edges get exercised


def _common(ctx, c: dict, sanitizing: bool = False):
    """The shape, run options, output format and --out path from the shared options."""
    from ..jobs import Options
    fmt = output_format(c["as_json"], c["as_csv"])
    if sanitizing and not any(ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE
                              for p in ("size", "m", "n", "k")):
        m, n, k = SANITIZE_SHAPE
        _note(f"sanitizing at {m}x{n}x{k} (the sanitizer is slow; odd sizes test the edges); "
              "give --size or -M/-N/-K to choose")
    else:
        m, n, k = c["m"] or c["size"], c["n"] or c["size"], c["k"] or c["size"]
    shape = make_shape(None, m, n, k)
    out_path = new_file(c["out_path"], "--out")
    opts = Options(reps=c["reps"], seed=c["seed"], fp64_check=c["check_ref"] == "fp64", timeout=c["timeout"],
                   dtype=c["dtype"] or "fp32", rounds=c["rounds"], out_dtype=c["out_dtype"] or "fp32")
    return shape, opts, fmt, out_path


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


def _print_rows(doc, rows, fmt, table):
    if fmt == "json":
        click.echo(export.dump(doc))
    elif fmt == "csv":
        click.echo(export.csv_text(rows), nl=False)
    else:
        out().print(table())


def _on_gpu(request: tuple, what: str):
    """(device, answer) for one request to a worker that needs no GEMM inputs (bandwidth, occupancy)."""
    from ..measure import on_gpu
    with _reporter() as reporter:
        return on_gpu(request, what, reporter)


def _plot(name: str, doc: dict, path: Path | None) -> None:
    if path:
        from ..present import plots
        getattr(plots, name)(doc, path)
        _note(f"plot written to {path}")


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
