"""gemmlab in a notebook: `%load_ext gemmlab`, then a cell that is a template, or any command on a line.

    %%gemmlab run -p TILE=32 --size 2048 --compare naive,tiled
    {#---
    name = "mytiled"
    ...the TOML header...
    ---#}
    ...the Jinja CUDA...

    %gemmlab compare --variants naive,tiled --size 2048      (any gemmlab command, its output in the cell)

The cell magic writes the cell to data_dir()/cells/NAME/NAME.cu.j2 (NAME from the header), so the file's
lines are the cell's, and calls the API with that directory among kernels_dirs; errors name the cell's
line (`cell line 12: error: ...`), one message and no traceback. Its subcommands are run (the default;
with --compare, the cell beside other variants), sweep and show (--what sass: the SASS, highlighted), and
their options are the CLI's (gemmlab/cli/common.py). A header with `from = "tiled"` starts from a built-in
template: its keys override the parent's and its body fills the parent's {% block %}s. A run returns
its ResultSet, so the table is the cell's output and `_` holds it; the table says how each row compares
with the last run of that variant and shape, which for a cell is its last run (the name stays).

docs/notebook.md is the reference; examples/tour.ipynb the tour.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import shlex
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.highlighter import RegexHighlighter
from rich.syntax import Syntax
from rich.text import Text
from rich.theme import Theme

from . import api
from .cli.common import dtype_option, names_list, overrides, param_options, shape_options
from .errors import GemmlabError
from .templates import HEADER_RE, NAME_RE, SUFFIX, builtin_dir, data_dir

NO_GPU = "no GPU here: this cell needs an NVIDIA GPU"


# ---- the cell as a template ---------------------------------------------------------------------------

def cells_dir() -> Path:
    """Where cell templates are written: one directory per cell name, so that no other cell (nor an old
    one of another notebook) is in the catalog of a run unless this session defined it."""
    return data_dir() / "cells"


_session: dict[str, Path] = {}  # the cells this Python process has written: name -> its directory


MAGIC_LINES = 1  # the cell's `%%gemmlab ...` line, above the template: the template's line 1 is the cell's 2


@dataclass(frozen=True)
class Cell:
    """A cell written as a template file. `shift` is how many lines the file's body lies below the cell's
    (non-zero only with `from`, whose merged header is longer than the cell's); header_lines is the
    file's header (its lines map to no line of the cell when shift is non-zero). Lines of the cell count
    its %%gemmlab line, as a notebook numbers them."""
    name: str
    path: Path
    shift: int = 0
    header_lines: int = 0

    @property
    def dir(self) -> Path:
        return self.path.parent

    def cell_line(self, file_line: int) -> int | None:
        if self.shift and file_line <= self.header_lines:
            return None
        return file_line - self.shift + MAGIC_LINES

    def locate(self, text: str) -> str:
        """Template locations in a message (`<path>:LINE`, absolute or relative) as the cell's lines."""
        if not text:
            return text
        forms = {str(self.path), str(self.path.resolve())}
        try:
            forms.add(os.path.relpath(self.path))
        except ValueError:
            pass
        pattern = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))

        def where(m):
            if m.group(1) is None:
                return "the cell"
            line = self.cell_line(int(m.group(1)))
            return "the cell's header (with its parent's)" if line is None else f"cell line {line}"
        text = re.sub(rf"(?:{pattern})(?::(\d+))?", where, text)
        # the `gemmlab show ... --kernels-dir <cells>` a compile error suggests: the magic's own
        return re.sub(r"gemmlab show --variant \S+.*?--what source", "%%gemmlab show (in this cell)", text)


def _header(text: str, where: str = "the cell") -> tuple[dict, int]:
    """The TOML header of a template's text, and the line of its closing `---#}`."""
    m = HEADER_RE.match(text)
    if not m:
        raise GemmlabError(f"{where} is not a template: it starts with a '{{#---' line, then a TOML header "
                           "that ends with '---#}'", hint="docs/notebook.md shows a cell; so does examples/tour.ipynb")
    try:
        meta = tomllib.loads(m.group(1))
    except tomllib.TOMLDecodeError as e:
        lm = re.search(r"at line (\d+)", str(e))
        at = f"cell line {int(lm.group(1)) + 1 + MAGIC_LINES}" if lm else where
        raise GemmlabError(f"bad template header at {at}: {re.sub(r' [(]at line .*[)]', '', str(e))}") from None
    return meta, m.group(0).count("\n") + 1


def _toml(value) -> str:
    """One TOML value on one line (inline tables and arrays): what a merged header is written with."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string takes JSON's escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    raise GemmlabError(f"a header value cannot be {value!r}")


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


# What a child does not inherit: these describe the parent against its own parent.
_NOT_INHERITED = ("predict", "predict_x")


def merge_headers(parent: dict, child: dict) -> dict:
    """The header of a cell with `from`: the parent's, with the cell's keys over it. params and launch
    are merged key by key (a parameter the cell declares replaces the parent's whole), constraints
    are added to the parent's, and `parent` defaults to the template the cell starts from."""
    out = {k: v for k, v in parent.items() if k not in _NOT_INHERITED}
    for k, v in child.items():
        if k == "from":
            continue
        if k in ("params", "launch") and isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = out[k] | v
        elif k == "constraints" and isinstance(v, list):
            out[k] = list(out.get(k, [])) + v
        else:
            out[k] = v
    if "parent" not in child:
        out["parent"] = child["from"]
    return out


def write_cell(text: str) -> Cell:
    """Write a cell as a template file in its own directory under cells_dir(); with `from`, the header
    merged with the built-in parent's and the body made an {% extends %} of the parent."""
    text = text if text.endswith("\n") else text + "\n"
    meta, end = _header(text)
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise GemmlabError("the cell's header needs name = \"...\", an identifier (letters, digits, _): the "
                           "template's name, which its runs are recorded under")
    shift, header_lines = 0, end
    if "from" in meta:
        parent = _parent(meta["from"], name)
        merged = merge_headers(_header(parent.read_text(), str(parent))[0], meta)
        lines = ["{#---"] + [f"{_key(k)} = {_toml(v)}" for k, v in merged.items()] + ["---#}"]
        body = HEADER_RE.sub("", text, count=1)
        if "{% extends" not in body:  # on the header's closing line: the cell's lines stay where they are
            rel = parent.relative_to(builtin_dir()).as_posix()
            body = f'{{% extends "{rel}" %}}' + body
        header_lines = len(lines)
        shift = header_lines - end
        text = "\n".join(lines) + body
    d = cells_dir() / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}{SUFFIX}"
    if not path.exists() or path.read_text() != text:  # unchanged: the compile cache and mtime stay
        path.write_text(text)
    _session[name] = d
    return Cell(name, path, shift, header_lines)


def _parent(name, child: str) -> Path:
    if not isinstance(name, str):
        raise GemmlabError("from names a built-in template, as a string: from = \"tiled\"")
    if name == child:
        raise GemmlabError(f"a cell that starts from {name} needs a name of its own, not {name!r}")
    v = api.catalog().get(name)
    if not v.builtin:
        raise GemmlabError(f"from = {name!r}: {name} is a template of yours; a cell starts from a built-in one",
                           hint=f"paste {v.path} into the cell instead")
    return v.path


# ---- the GPU ------------------------------------------------------------------------------------------

def gpu_missing() -> str | None:
    """None when there is a CUDA GPU to run on (or a stand-in GPU side: $GEMMLAB_GPU_JOBS, as the tests
    set it), else why not, in words."""
    from .worker import GPU_JOBS_ENV
    return None if os.environ.get(GPU_JOBS_ENV) else _no_cuda()


@functools.lru_cache(maxsize=None)
def _no_cuda() -> str | None:
    from .gpu.driver import cuda
    try:
        cuda()
    except GemmlabError as e:
        return e.message
    return None


def needs_gpu() -> bool:
    """For a notebook's Python cells: True if there is a GPU; else say so (once, in the cell) and False.

        if needs_gpu():
            rs = gemmlab.compare(["naive", "tiled"], shape=2048)
    """
    why = gpu_missing()
    if why:
        _say(f"[yellow]{NO_GPU}[/] [dim]({escape(why)})[/]")
    return why is None


# ---- showing things -----------------------------------------------------------------------------------

def _console(stderr: bool = False) -> Console:
    """A console on today's stdout/stderr: in a notebook rich shows what it prints as HTML in the cell."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, highlight=False, width=None if getattr(stream, "isatty", bool)() else 200)


def _say(markup: str, stderr: bool = False) -> None:
    _console(stderr).print(markup, soft_wrap=True)


def _error(e: GemmlabError, cell: Cell | None = None) -> None:
    """One line `error: ...` (and the hint under it), with template locations as the cell's lines."""
    message, hint = (cell.locate(e.message), cell.locate(e.hint)) if cell else (e.message, e.hint)
    _say(f"[bold red]error:[/] {escape(message)}", stderr=True)
    if hint:
        _say(f"[dim]{escape(hint)}[/]", stderr=True)


class Rich:
    """A rich renderable as a notebook shows it (HTML) and as plain text (a terminal, a test)."""

    def __init__(self, renderable, text: str | None = None, theme: Theme | None = None):
        self.renderable, self.text, self.theme = renderable, text, theme

    def _page(self) -> Console:
        page = Console(file=io.StringIO(), record=True, width=200, force_jupyter=False, color_system="truecolor",
                       theme=self.theme)
        page.print(self.renderable)
        return page

    def _repr_html_(self) -> str:
        return self._page().export_html(inline_styles=True, code_format='<pre style="font-size: 12px">{code}</pre>')

    def __repr__(self) -> str:
        return self.text if self.text is not None else self._page().export_text()


class SassHighlighter(RegexHighlighter):
    """SASS as cuobjdump prints it: addresses and encodings dimmed, opcodes bold, memory operations (what
    to look for first: LDG, LDS, STS...) and the math (FFMA, HMMA...) in their own colours."""
    base_style = "sass."
    highlights = [
        r"(?P<comment>/\*[^*]*\*/)",
        r"(?m)^\s*/\*[0-9a-f]+\*/\s+(?P<pred>@!?U?P[T0-9]+\s+)?(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)",
        r"\b(?P<mem>(?:LDG|STG|LDS|STS|LDSM|LDGSTS|LDC|ULDC|LD|ST|ATOMG?|ATOMS|RED|UTMALDG|UBLKCP|SYNCS)(?:\.[A-Z0-9_]+)*)\b",
        r"\b(?P<math>(?:FFMA|FMUL|FADD|HFMA2|HMMA|HGMMA|IMMA|DFMA|IMAD|FMNMX)(?:\.[A-Z0-9_]+)*)\b",
        r"\b(?P<reg>U?R[0-9]+|U?RZ|U?P[0-9T]|SR_[A-Z_.]+)\b",
        r"(?P<const>c\[0x[0-9a-f]+\]\[0x[0-9a-f]+\])",
        r"(?P<label>\.L_x_[0-9]+|Function : \w+)",
    ]


SASS_THEME = Theme({"sass.comment": "grey50", "sass.op": "bold", "sass.pred": "yellow", "sass.mem": "bold magenta",
                    "sass.math": "bold green", "sass.reg": "cyan", "sass.const": "blue", "sass.label": "bold yellow"})


def code(text: str, what: str) -> Rich:
    """The source (CUDA, numbered lines), PTX or SASS (highlighted) of `show`, for the notebook."""
    if what == "sass":
        return Rich(SassHighlighter()(Text(text)), text, SASS_THEME)
    return Rich(Syntax(text, "cuda" if what == "source" else "text", line_numbers=True, word_wrap=False), text)


def _display(obj) -> None:
    from IPython.display import display
    display(obj)


def _show_plot(path: Path | None) -> None:
    if path and Path(path).is_file():
        from IPython.display import Image
        _display(Image(filename=str(path)))


def _plot_argv(argv: list[str]) -> tuple[list[str], Path | None]:
    """`--plot` with no file after it: a new file in a temporary directory (a notebook is run again and
    again, and --plot never overwrites). The plot's path, to show it in the cell after the command."""
    out, path = list(argv), None
    for i, a in enumerate(out):
        if a == "--plot":
            if i + 1 == len(out) or out[i + 1].startswith("-"):
                path = Path(tempfile.mkdtemp(prefix="gemmlab-plot-")) / "plot.png"
                out.insert(i + 1, str(path))
            else:
                path = Path(out[i + 1])
            break
        if a.startswith("--plot="):
            path = Path(a.split("=", 1)[1])
            break
    return out, path


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
@_kernels_dir
def run_command(**kw):
    """Check the cell's kernel against cupy.matmul, then time it (with cuBLAS beside it)."""


@click.command("sweep")
@click.option("--param", "specs", multiple=True, required=True, metavar="NAME=V1,V2|A..B[:STEP]",
              help="Values of one parameter (repeatable: the grid is every combination).")
@shape_options
@click.option("--jobs", "jobs_", type=click.IntRange(min=1), help="Compiles at a time (default: the CPU count).")
@click.option("--fresh", is_flag=True, help="Measure again what the history already has for this GPU and shape.")
@click.option("--plot", "plot_path", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Draw GFLOP/s per configuration in the cell (and into FILE if given).")
@_kernels_dir
def sweep_command(**kw):
    """Time the cell's kernel over a grid of parameters, fastest first."""


@click.command("show")
@param_options
@click.option("--what", type=click.Choice(["source", "ptx", "sass", "resources"]), default="source",
              show_default=True, help="What to show.")
@click.option("--arch", help="Compile for this architecture (e.g. sm_90) instead of the GPU's.")
@dtype_option
@_kernels_dir
def show_command(**kw):
    """The cell's rendered CUDA source, its PTX, its SASS (highlighted) or its resources."""


COMMANDS = {"run": run_command, "sweep": sweep_command, "show": show_command}


def parse_line(line: str) -> tuple[str, dict]:
    """The cell magic's line: (command, its options as the command's parameters). The command is run,
    sweep or show; a line that starts with an option is a run. A usage mistake raises click.UsageError;
    --help prints the help and raises click.exceptions.Exit."""
    argv = shlex.split(line)
    name = "run" if not argv or argv[0].startswith("-") else argv.pop(0)
    if name not in COMMANDS:
        raise click.UsageError(f"%%gemmlab takes run, sweep or show, not {name!r} (a line magic, %gemmlab, runs "
                               "any gemmlab command)")
    cmd = COMMANDS[name]
    with cmd.make_context(f"%%gemmlab {name}", argv) as ctx:
        return name, dict(ctx.params)


def _measure_args(p: dict) -> dict:
    from .cli.common import output_format
    output_format(p["as_json"], p["as_csv"])  # one at most
    shape = (p["m"] or p["size"], p["n"] or p["size"], p["k"] or p["size"])
    return dict(shape=shape, dtype=p["dtype"], reps=p["reps"], rounds=p["rounds"], seed=p["seed"], check=p["check_ref"],
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
    from .present.export import csv_text, dump
    from .results import records
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
    from .results.records import params_text
    for r in rs:
        if r["variant"] == name and r.get("vs_last") is not None:
            _say(f"[bold]{escape(name)}[/] {escape(params_text(r['params']))}: {escape(r['vs_last_text'])} "
                 "[dim](against its last run)[/]")


def _run(cell: Cell, p: dict):
    args, params, dirs = _measure_args(p), _params(p), _dirs(cell, p["kernels_dirs"])
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
        rs = api.compare(others + [cell.name], kernels_dirs=dirs, **args)
    else:
        rs = api.run(cell.name, params, kernels_dirs=dirs, cublas=not p["no_cublas"], **args)
    return _emit(rs, p, cell)


def _sweep(cell: Cell, p: dict):
    from .files import new_file
    dirs = _dirs(cell, p["kernels_dirs"])
    plot = p["plot_path"]
    plot = None if plot is None else new_file(plot, "--plot") if plot else \
        Path(tempfile.mkdtemp(prefix="gemmlab-plot-")) / "sweep.png"
    if not _gpu_or_build(cell, p, {}, dirs):
        return None
    rs = api.sweep(cell.name, list(p["specs"]), fresh=p["fresh"], jobs=p["jobs_"], kernels_dirs=dirs, **_measure_args(p))
    out = _emit(rs, p, cell)
    if plot and not rs.interrupted:
        from .present.plots import sweep_plot
        sweep_plot(rs.to_json(), plot)
        _show_plot(plot)
    return out


def _show(cell: Cell, p: dict):
    what = p["what"]
    dirs = _dirs(cell, p["kernels_dirs"])
    shown = api.show(cell.name, _params(p), what, dtype=p["dtype"], arch=p["arch"], kernels_dirs=dirs)
    if what == "resources":
        from .present.tables import resources_table
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
    from .cli import cli
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


# ---- IPython ----------------------------------------------------------------------------------------------

def load_ipython_extension(ipython) -> None:
    """`%load_ext gemmlab`: the %gemmlab line magic and the %%gemmlab cell magic."""
    from IPython.core.magic import Magics, line_cell_magic, magics_class

    @magics_class
    class GemmlabMagics(Magics):
        @line_cell_magic
        def gemmlab(self, line, cell=None):
            """%gemmlab ARGS: any gemmlab command. %%gemmlab [run|sweep|show] OPTIONS: the cell is a template
            (docs/notebook.md)."""
            if cell is None:
                run_line(line)
                return None
            return run_cell(line, cell)

    ipython.register_magics(GemmlabMagics)
