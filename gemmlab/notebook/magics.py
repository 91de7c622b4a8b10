"""The magics: %%gemmlab's line parsed with the CLI's options (parse_line), the cell run, swept or shown
(run_cell), and %gemmlab, any gemmlab command (run_line).
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import tempfile
from pathlib import Path

import click
from rich.markup import escape

from .. import api
from ..cli.common import (dtype_option, gpus_option, names_list, overrides, param_options, refs_option, shape_options,
                          show_options)
from ..cli.problems import problem_of, problem_options, problem_shape, size_given
from ..errors import GemmlabError
from .cells import NO_GPU, Cell, _session, gpu_missing, write_cell
from .display import Rich, _display, _error, _plot_argv, _say, _show_plot, code

# ---- the cell magic's commands: the CLI's options --------------------------------------------------------

def _kernels_dir(f):
    return click.option("--kernels-dir", "kernels_dirs", multiple=True, type=click.Path(file_okay=False),
                        help="Another directory of templates (repeatable).")(f)


@click.command("run")
@param_options
@shape_options
@click.option("--compare", "against", metavar="V1,V2", help="Also run these variants at their defaults, before the "
              "cell's, with speed-ups rung over rung (the cell then runs at its defaults too).")
@click.option("--no-cublas", is_flag=True, help="Skip the cuBLAS timing (no % of cuBLAS).")
@refs_option
@problem_options
@_kernels_dir
def run_command(**kw):
    """Check the cell's kernel against cupy.matmul, then time it (with cuBLAS beside it); a template of
    another problem (its header's `problem`) against that problem's cupy reference."""


@click.command("sweep")
@click.option("--param", "specs", multiple=True, required=True, metavar="NAME=V1,V2|A..B[:STEP]",
              help="Values of one parameter (repeatable: the grid is every combination).")
@shape_options
@click.option("--jobs", "jobs_", type=click.IntRange(min=1), help="Compiles at a time (default: the CPU count).")
@click.option("--fresh", is_flag=True, help="Measure again what the history already has for this GPU and shape.")
@click.option("--plot", "plot_path", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Draw GFLOP/s per configuration in the cell (and into FILE if given).")
@gpus_option
@_kernels_dir
def sweep_command(**kw):
    """Time the cell's kernel over a grid of parameters, fastest first."""


@click.command("show")
@param_options
@show_options
@dtype_option
@_kernels_dir
def show_command(**kw):
    """The cell's rendered CUDA source, its PTX, its SASS (highlighted) or its resources."""


COMMANDS = {"run": run_command, "sweep": sweep_command, "show": show_command}


def parse_line(line: str) -> tuple[str, dict]:
    """The cell magic's line: (command, its options as the command's parameters, and size_given: whether
    --size was on the line, since another problem's default size is its own). The command is run, sweep
    or show; a line that starts with an option is a run. A usage mistake raises click.UsageError; --help
    prints the help and raises click.exceptions.Exit."""
    argv = shlex.split(line)
    name = "run" if not argv or argv[0].startswith("-") else argv.pop(0)
    if name not in COMMANDS:
        raise click.UsageError(f"%%gemmlab takes run, sweep or show, not {name!r} (a line magic, %gemmlab, runs "
                               "any gemmlab command)")
    cmd = COMMANDS[name]
    with cmd.make_context(f"%%gemmlab {name}", argv) as ctx:
        return name, dict(ctx.params, size_given="size" in ctx.params and size_given(ctx))


def _measure_args(p: dict, problem: str) -> dict:
    """The API's arguments from the line: the shape as `problem` reads the shape options (as the CLI's)."""
    from ..cli.common import output_format
    output_format(p["as_json"], p["as_csv"])  # one at most
    shape = ((p["m"] or p["size"], p["n"] or p["size"], p["k"] or p["size"]) if problem == "gemm"
             else problem_shape(p, problem, p["size_given"]))
    return dict(shape=shape, dtype=p["dtype"], out_dtype=p["out_dtype"], reps=p["reps"], rounds=p["rounds"], seed=p["seed"], check=p["check_ref"],
                timeout=p["timeout"], out=p["out_path"])


def _dirs(cell: Cell, given) -> tuple:
    """The cell's directory first, the other cells of this session after it, then the line's."""
    return tuple(dict.fromkeys([cell.dir, *_session.values(), *map(Path, given)]))


def run_cell(line: str, text: str):
    """The cell magic: parse the line, write the cell, and run, sweep or show it."""
    try:
        name, p = parse_line(line)
    except click.exceptions.Exit:
        return None
    except click.UsageError as e:
        command = e.ctx.command_path if e.ctx else "%%gemmlab"
        _say(f"[bold red]error:[/] {escape(e.format_message())} [dim](see {escape(command)} --help)[/]", stderr=True)
        return None
    cell = None
    try:
        cell = write_cell(text)
        return {"run": _run, "sweep": _sweep, "show": _show}[name](cell, p)
    except GemmlabError as e:
        _error(e, cell)
    return None


def _params(p: dict) -> dict:
    return overrides(p["tile"], p["reg"], p["raw_params"])


def _gpu_or_build(cell: Cell, p: dict, params: dict, dirs) -> bool:
    """Render and compile the cell first (for the GPU, else sm_90): a broken cell is one error naming its
    line, before any GPU work, and without a GPU too. Then True if there is a GPU to run it on, else say
    that the cell needs one."""
    why = gpu_missing()
    v = api.catalog(dirs).get(cell.name)
    kernel = api.build(v, v.resolve(v.for_dtype(p.get("dtype"), params)), arch="sm_90" if why else None)
    if why:
        r = kernel.resources
        _say(f"[yellow]{NO_GPU}[/] to check and time it [dim](it compiles for {kernel.arch}: {r.registers} "
             f"registers, {r.spills} bytes spilled; {escape(why)})[/]")
    return why is None


def _emit(rs, p: dict, cell: Cell):
    """Notes under the table as the CLI prints them: failures, an interruption, the change since last time."""
    from ..present.export import csv_text, dump
    from ..results import records
    if p.get("as_json"):
        print(dump(rs.to_json()))
    elif p.get("as_csv"):
        print(csv_text(rs.to_dicts()), end="")
    else:
        _vs_last(rs, cell.name)
    for r in rs.failures:
        _say(f"[bold red]{r['status']}[/] {escape(r['variant'])} {records.params_text(r['params'])}: "
             f"{escape(cell.locate(records.failure_text(r)))}; its time is not reported", stderr=True)
    if rs.interrupted:
        done = len([r for r in rs if r["variant"] != "cuBLAS"])
        _say(f"[yellow]interrupted:[/] {done} measured; those are shown (and recorded)", stderr=True)
    return None if (p.get("as_json") or p.get("as_csv")) else rs


def _vs_last(rs, name: str) -> None:
    """The cell's row against its last run (of this shape, on this GPU): the history's words for it."""
    from ..results.records import params_text
    for r in rs:
        if r["variant"] == name and r.get("vs_last") is not None:
            _say(f"[bold]{escape(name)}[/] {escape(params_text(r['params']))}: {escape(r['vs_last_text'])} "
                 "[dim](against its last run)[/]")


def _run(cell: Cell, p: dict):
    params, dirs = _params(p), _dirs(cell, p["kernels_dirs"])
    args = dict(_measure_args(p, problem_of(p["problem"], [cell.name], dirs)), problem=p["problem"], inputs=p["inputs"])
    if p["against"] is not None:
        if params:
            raise GemmlabError("--compare runs every variant at its defaults; -p/--tile/--reg set the cell's "
                               "parameters for a run alone", hint="set the defaults in the cell's header instead")
        others = names_list(p["against"], "--compare")
        if cell.name in others:
            raise GemmlabError(f"--compare {p['against']}: {cell.name} is this cell; name the variants beside it")
    if not _gpu_or_build(cell, p, params, dirs):
        return None
    if p["against"] is not None:
        rs = api.compare(others + [cell.name], kernels_dirs=dirs, refs=p["refs"], **args)
    else:
        rs = api.run(cell.name, params, kernels_dirs=dirs, cublas=not p["no_cublas"], refs=p["refs"], **args)
    return _emit(rs, p, cell)


def _sweep(cell: Cell, p: dict):
    from ..files import new_file
    dirs = _dirs(cell, p["kernels_dirs"])
    plot = p["plot_path"]
    plot = None if plot is None else new_file(plot, "--plot") if plot else \
        Path(tempfile.mkdtemp(prefix="gemmlab-plot-")) / "sweep.png"
    if not _gpu_or_build(cell, p, {}, dirs):
        return None
    rs = api.sweep(cell.name, list(p["specs"]), fresh=p["fresh"], jobs=p["jobs_"], kernels_dirs=dirs, gpus=p["gpus"],
                   **_measure_args(p, problem_of(None, [cell.name], dirs)))
    out = _emit(rs, p, cell)
    if plot and not rs.interrupted:
        from ..present.plots import sweep_plot
        sweep_plot(rs.to_json(), plot)
        _show_plot(plot)
    return out


def _show(cell: Cell, p: dict):
    what = p["what"]
    dirs = _dirs(cell, p["kernels_dirs"])
    shown = api.show(cell.name, _params(p), what, dtype=p["dtype"], arch=p["arch"], kernels_dirs=dirs)
    if what == "resources":
        from ..present.tables import resources_table
        _display(Rich(resources_table(shown)))
    else:
        _display(code(shown, what))
    return None


# ---- the line magic: any command -------------------------------------------------------------------------

# The commands that run something on the GPU: without one, the line magic says so instead.
GPU_COMMANDS = ("run", "compare", "sweep", "suite", "scaling", "profile", "occupancy", "device")


def _option(argv: list[str], name: str, default: str | None = None) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def run_line(line: str) -> int:
    """`%gemmlab ARGS`: the gemmlab command, its output in the cell (and a --plot's picture; `--plot` with no
    file draws into a new one; `show`'s code highlighted). The cells of this session are templates it can
    name. Its exit status (the CLI's)."""
    from ..cli import cli
    argv, plot = _plot_argv(shlex.split(line))
    command = argv[0] if argv else None
    if command in GPU_COMMANDS and "--help" not in argv and "-h" not in argv and (why := gpu_missing()):
        _say(f"[yellow]{NO_GPU}[/] [dim]({escape(why)})[/]")
        return 1
    what = _option(argv, "--what", "source")
    shown = command == "show" and what != "resources" and not {"--json", "--csv", "--help", "-h"} & set(argv)
    old = os.environ.get("GEMMLAB_KERNELS")
    if _session:
        os.environ["GEMMLAB_KERNELS"] = os.pathsep.join([*map(str, _session.values())] + ([old] if old else []))
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured) if shown else contextlib.nullcontext():
            cli.main(args=argv, prog_name="gemmlab", standalone_mode=True)
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    finally:
        if _session:
            if old is None:
                os.environ.pop("GEMMLAB_KERNELS", None)
            else:
                os.environ["GEMMLAB_KERNELS"] = old
    if shown and captured.getvalue():
        _display(code(captured.getvalue(), what))
    _show_plot(plot)
    return status
