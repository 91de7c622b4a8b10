"""The commands that look without measuring: list, show, build, cache, device, new, history."""

from __future__ import annotations

import os
from dataclasses import asdict
import re
import shlex
import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.syntax import Syntax

from ..results import history

from ..present import export, fit, tables

from ..results import records
from ..api import catalog, default_arch
from ..compile import compile_rendered, sass
from ..errors import GemmlabError
from ..render import render
from ..templates import NAME_RE, SUFFIX, default_user_dir, load_variant, user_dirs
from .common import (_note, _print_rows, _spinner, cli, dtype_option, err, kernels_dir_option, names_list,
                     out, output_format, output_options, overrides, param_options, show_options)


@cli.command("list")
@dtype_option
@click.option("--problem", metavar="NAME|all",
              help="Only this problem's variants (gemm, copy, transpose, reduce, scan, histogram), or all. "
                   "Default: the table groups every problem, GEMM's first; --json and --csv list GEMM's.")
@kernels_dir_option
@output_options
def list_cmd(dtype, problem, kernels_dirs, as_json, as_csv):
    """The variants, in ladder order, with their idea, parent, input types and parameters, by problem."""
    from .. import problems as declared
    cat = catalog(kernels_dirs)
    fmt = output_format(as_json, as_csv)
    if problem not in (None, "all"):
        declared.check_name(problem)
    shown = cat.problems() if problem == "all" or (problem is None and fmt == "table") else [problem or "gemm"]
    ladder = [v for p in shown for v in cat.ladder(p) if dtype is None or dtype in v.dtypes]
    # The templates that do not load are listed too (as the table shows them), with why: broken = true.
    broken = [{"name": name, "broken": True, "error": e.message} for name, e in cat.broken.items()]
    if fmt == "json":
        click.echo(export.dump([{"name": v.name, "parent": v.parent, "idea": v.idea, "dtypes": list(v.dtypes),
                                 "source": str(v.path),
                                 "user": not v.builtin, "shadows": str(v.shadows) if v.shadows else None,
                                 "params": {n: {"default": p.default, "choices": p.choices, "help": p.help}
                                            for n, p in v.params.items()}, "broken": False}
                                | ({"problem": v.problem} if v.problem != "gemm" or problem else {})
                                for v in ladder] + broken))
        return
    if fmt == "csv":
        click.echo(export.csv_text([{"name": v.name, "parent": v.parent, "idea": v.idea, "dtypes": " ".join(v.dtypes),
                                     "defaults": v.defaults(), "source": str(v.path), "user": not v.builtin,
                                     "broken": False, "error": None}
                                    | ({"problem": v.problem} if problem else {})
                                    for v in ladder] + broken), nl=False)
        return
    for i, p in enumerate(shown):
        mine = [v for v in ladder if v.problem == p]
        if p != "gemm" and not mine:
            continue
        if p == "gemm":
            title = "gemmlab variants (ladder order)" + (f", {dtype} only" if dtype else "")
        else:
            title = f"{p}: {declared.WHAT[p]} (ladder order)"
        last = i == len(shown) - 1
        out().print(tables.variants_table(mine, cat.broken if last else {}, title))


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
@show_options
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
    from .. import grid as grids
    from ..cache import prune_cache
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
    from ..cache import compile_times
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
    from ..cache import CACHE_MAX_ENV, cache_stats, clear_cache
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
    from ..gpu.device import get_device, measure_copy_bandwidth
    dev = get_device()
    doc = dev.to_json()
    if measure:
        from ..gpu.problem import Problem
        from ..results.model import Shape
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
    load_variant(target, builtin=False, find=lambda n: cat.variants[n].path if n in cat.variants else None)
    shadow = " (it shadows the built-in one)" if name in cat.variants and cat.variants[name].builtin else ""
    out().print(f"wrote [cyan]{escape(str(target))}[/]{shadow}")
    found = directory.resolve() in {d.resolve() for d in user_dirs()}  # found without a flag
    flag = "" if found else f" --kernels-dir {shlex.quote(str(directory))}"
    out().print(escape(f"edit it, then:  gemmlab run --variant {name}{flag}\n"
                       f"           or:  gemmlab compare --variants {v.name},{name}{flag}"))
