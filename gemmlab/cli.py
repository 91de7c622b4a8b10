"""The `gemmlab` command: parse, call the pipeline's stages, print. No logic of its own.

Every error a user can cause is a GemmlabError: printed as one red message, exit status 1.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table

from . import __version__, report
from .api import catalog, default_arch
from .compile import compile_rendered, sass
from .errors import GemmlabError
from .render import render
from .templates import NAME_RE, SUFFIX, default_user_dir, load_variant, show_value

def _console(stderr: bool = False) -> Console:
    """Made at use time, so it writes to whatever stdout/stderr is then (a pipe, a test's buffer).
    A terminal sets the width; a pipe or file gets wide tables rather than 80 squeezed columns."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", 200))
    return Console(file=stream, highlight=False, width=width)


def out() -> Console:
    return _console()


def err() -> Console:
    return _console(stderr=True)


class Cli(click.Group):
    """Turns GemmlabError (and the few library errors a user can provoke) into one clear message."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GemmlabError as e:
            _fail(ctx, e.message, e.hint)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except MemoryError:
            _fail(ctx, "out of host memory")
        except Exception as e:
            if type(e).__name__ == "OutOfMemoryError":  # cupy's, raised where we did not predict it
                _fail(ctx, f"out of GPU memory: {e}", "choose a smaller shape")
            if os.environ.get("GEMMLAB_DEBUG"):
                raise
            _fail(ctx, f"internal error ({type(e).__name__}): {e}",
                  "this is a gemmlab bug; rerun with GEMMLAB_DEBUG=1 for the traceback")


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


def shape_options(f):
    f = click.option("-K", "k", type=click.IntRange(min=1), help="K (overrides --size).")(f)
    f = click.option("-N", "n", type=click.IntRange(min=1), help="N (overrides --size).")(f)
    f = click.option("-M", "m", type=click.IntRange(min=1), help="M (overrides --size).")(f)
    f = click.option("--size", type=click.IntRange(min=1), default=4096, show_default=True,
                     help="M = N = K.")(f)
    f = click.option("--reps", type=click.IntRange(min=1), default=10, show_default=True,
                     help="Least number of timed repetitions (more are run to fill 100 ms).")(f)
    f = click.option("--seed", type=int, help="Seed of the random inputs (default: fresh each run).")(f)
    f = click.option("--check", "check_ref", type=click.Choice(["cupy", "fp64"]), default="cupy",
                     show_default=True, help="Reference: cupy.matmul in FP32, or float64.")(f)
    f = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)
    return f


def overrides(tile, reg, raw_params) -> dict:
    out_ = {}
    for item in raw_params:
        if "=" not in item:
            raise GemmlabError(f"-p takes NAME=VALUE, not '{item}'")
        k, v = item.split("=", 1)
        out_[k.strip()] = v.strip()
    if tile is not None:
        out_["TILE"] = tile
    if reg is not None:
        out_["REG"] = reg
    return out_


def make_shape(size, m, n, k):
    from .runner import Shape
    return Shape(m or size, n or size, k or size)


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
@kernels_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(kernels_dirs, as_json):
    """The variants, in ladder order, with their idea, parent and parameters."""
    cat = catalog(kernels_dirs)
    if as_json:
        click.echo(report.dump([{"name": v.name, "parent": v.parent, "idea": v.idea, "source": str(v.path),
                                 "user": not v.builtin, "shadows": str(v.shadows) if v.shadows else None,
                                 "params": {n: {"default": p.default, "choices": p.choices, "help": p.help}
                                            for n, p in v.params.items()}} for v in cat.ladder()]))
        return
    t = Table(title="gemmlab variants (ladder order)", title_justify="left", show_lines=True)
    for c in ("variant", "parent", "idea", "parameters (default [choices])", "source"):
        t.add_column(c, overflow="fold")
    for v in cat.ladder():
        ps = escape("\n".join(f"{n}={show_value(p.default)}"
                              + (f" [{', '.join(map(show_value, p.choices))}]" if p.choices else "")
                              for n, p in v.params.items()) or "-")
        src = "built-in" if v.builtin else f"[cyan]{escape(str(v.path))}[/]"
        if v.shadows:
            src += f"\n[yellow]shadows {escape(str(v.shadows))}[/]"
        t.add_row(f"[bold]{v.name}[/]", v.parent or "-", escape(v.idea), ps, src)
    for name, e in cat.broken.items():
        t.add_row(f"[red]{name}[/]", "", f"[red]{escape(e.message)}[/]", "", "[red]broken[/]")
    out().print(t)


def _run_rows(command, jobs, shape, reps, seed, check_ref, with_cublas, progress=None, keep_going=False):
    """Check and time each (variant, params) on one set of inputs, cuBLAS first. With keep_going, a
    variant that does not compile becomes an ERROR row and the others still run."""
    from .runner import Problem, Result
    problem = Problem(shape, seed, fp64_check=check_ref == "fp64")
    dev = problem.device
    task = progress.add_task("", total=len(jobs) + int(with_cublas)) if progress else None

    def step(text=None):  # show what runs now; without text, count one job done
        if not progress:
            return
        if text:
            progress.update(task, description=text)
        else:
            progress.advance(task)

    results = []
    cublas = None
    if with_cublas:
        step("cuBLAS")
        cublas = problem.cublas(reps)
        step()
    for v, params in jobs:
        step(f"compile, check and time {v.name} {report.params_text(params)}")
        try:
            compiled = compile_rendered(render(v, params), dev.arch)
            results.append(problem.run(v, params, compiled, reps))
        except GemmlabError as e:
            if not keep_going:
                raise
            results.append(Result(v.name, params, shape, source=str(v.path), user=not v.builtin, error=str(e)))
        step()
    cublas_ms = cublas.valid_time if cublas else None
    rows = [report.row(r, dev.peak_fp32, cublas_ms) for r in results + ([cublas] if cublas else [])]
    return report.meta(command, dev, shape, problem.seed), rows


def _emit(doc, rows, as_json, speedups):
    doc["rows"] = rows
    if as_json:
        click.echo(report.dump(doc))
    else:
        out().print(report.results_table(rows, report.title_for(doc), speedups))
        if any(r.get("user") for r in rows):
            out().print("[dim](user) = a template from a user directory[/]")
    bad = report.failures(rows)
    for r in bad:
        what = r["error"] or (f"{r['unwritten']} elements of C never written" if r["unwritten"]
                              else f"relative error {r['rel_err']:.2e} > tolerance {r['tol']:.0e}")
        err().print(f"[bold red]FAIL[/] {escape(r['variant'])} {report.params_text(r['params'])}: {escape(what)}; "
                  "its time is not reported")
    if bad:
        sys.exit(1)


@cli.command()
@click.option("--variant", "-v", "name", required=True, help="The variant to run (see `gemmlab list`).")
@param_options
@shape_options
@click.option("--no-cublas", is_flag=True, help="Skip the cuBLAS timing (no % of cuBLAS).")
@kernels_dir_option
def run(name, tile, reg, raw_params, size, m, n, k, reps, seed, check_ref, as_json, no_cublas, kernels_dirs):
    """Check one variant against cupy.matmul, then time it (with cuBLAS beside it)."""
    cat = catalog(kernels_dirs)
    v = cat.get(name)
    params = v.resolve(overrides(tile, reg, raw_params))
    shape = make_shape(size, m, n, k)
    doc, rows = _run_rows("run", [(v, params)], shape, reps, seed, check_ref, not no_cublas)
    _emit(doc, rows, as_json, speedups=False)


@cli.command()
@click.option("--variants", help="Comma-separated variants (default: the whole ladder).")
@shape_options
@kernels_dir_option
def compare(variants, size, m, n, k, reps, seed, check_ref, as_json, kernels_dirs):
    """The ladder at each variant's defaults, plus cuBLAS, with speed-ups rung over rung."""
    cat = catalog(kernels_dirs)
    chosen = [cat.get(x.strip()) for x in variants.split(",") if x.strip()] if variants else cat.ladder()
    if not chosen:
        raise GemmlabError("no variants to compare")
    jobs = [(v, v.resolve()) for v in chosen]
    shape = make_shape(size, m, n, k)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=err(), transient=True) as progress:
        doc, rows = _run_rows("compare", jobs, shape, reps, seed, check_ref, True, progress, keep_going=True)
    report.add_speedups(rows)
    _emit(doc, rows, as_json, speedups=True)


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
@kernels_dir_option
def show(name, tile, reg, raw_params, what, arch, kernels_dirs):
    """The rendered CUDA source, its PTX, its SASS or its resource usage."""
    cat = catalog(kernels_dirs)
    v = cat.get(name)
    params = v.resolve(overrides(tile, reg, raw_params))
    rendered = render(v, params)
    if what == "source":
        _print_code(rendered.source, "cuda")
        return
    arch, note = default_arch(arch)
    _note(note)
    compiled = compile_rendered(rendered, arch)
    if what == "ptx":
        _print_code(compiled.ptx, "text")
    elif what == "sass":
        _print_code(sass(compiled), "text")
    else:
        r = compiled.resources
        t = Table(title=f"{v.name} {report.params_text(params)} for {arch}", title_justify="left")
        t.add_column("resource")
        t.add_column("value", justify="right")
        threads = v.threads(params)
        for label, val in (("registers / thread", r.registers), ("threads / block", threads),
                           ("static shared memory / block (B)", r.smem),
                           ("stack frame (B)", r.stack), ("spill stores (B)", r.spill_stores),
                           ("spill loads (B)", r.spill_loads), ("barriers", r.barriers),
                           ("compile ms", "cached" if compiled.cached else f"{compiled.compile_ms:.0f}")):
            t.add_row(label, str(val))
        out().print(t)


@cli.command()
@click.option("--variant", "-v", "names", multiple=True, help="Variants to build (default: all).")
@click.option("--arch", help="Architecture (default: the GPU's, else sm_90).")
@click.option("--all-configs", is_flag=True, help="Every valid combination of parameter choices.")
@click.option("--no-cache", is_flag=True, help="Compile even when a cached cubin exists.")
@kernels_dir_option
def build(names, arch, all_configs, no_cache, kernels_dirs):
    """Compile variants (no GPU needed): registers, shared memory, spills, compile time."""
    cat = catalog(kernels_dirs)
    variants = [cat.get(n) for n in names] if names else cat.ladder()
    arch, note = default_arch(arch)
    _note(note)
    t = Table(title=f"build for {arch}", title_justify="left")
    for c in ("variant", "params", "regs", "smem", "stack", "spills", "compile ms", "result"):
        t.add_column(c, justify="left" if c in ("variant", "params", "result") else "right")
    failed = []
    for v in variants:
        configs = [(p, bad) for p, bad in v.configs() if not bad] if all_configs else [(v.defaults(), [])]
        for params, _ in configs:
            try:
                c = compile_rendered(render(v, params), arch, use_cache=not no_cache)
            except GemmlabError as e:
                failed.append((v.name, params, e))
                t.add_row(v.name, report.params_text(params), "", "", "", "", "", "[bold red]FAIL[/]")
                continue
            r = c.resources
            t.add_row(v.name, report.params_text(params), str(r.registers), str(r.smem), str(r.stack),
                      f"[red]{r.spills}[/]" if r.spills else "0",
                      "cached" if c.cached else f"{c.compile_ms:.0f}", "[green]ok[/]")
    out().print(t)
    for name, params, e in failed:
        err().print(f"[bold red]error:[/] {name} {report.params_text(params)}: {escape(str(e))}", soft_wrap=True)
    for name in cat.broken:
        if not names or name in names:
            failed.append(name)
            err().print(f"[bold red]error:[/] {escape(str(cat.broken[name]))}", soft_wrap=True)
    if failed:
        sys.exit(1)


@cli.command()
@click.option("--measure", is_flag=True, help="Also measure copy bandwidth and cuBLAS FP32 rate.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def device(measure, as_json):
    """The GPU: SMs, clocks, memory, caches, and how its peaks are computed."""
    from .device import get_device, measure_copy_bandwidth
    dev = get_device()
    doc = dev.to_json()
    if measure:
        from .runner import Problem, Shape
        doc["measured_copy_tbs"] = measure_copy_bandwidth() / 1e12
        r = Problem(Shape(8192, 8192, 8192)).cublas()
        doc["measured_cublas_fp32_tflops"] = r.shape.flops / (r.timing.median_ms * 1e-3) / 1e12
    if as_json:
        click.echo(report.dump(doc))
        return
    t = Table(title=f"device {dev.index}: {dev.name}", title_justify="left")
    t.add_column("fact")
    t.add_column("value", justify="right")
    t.add_column("how")
    facts = [
        ("compute capability", f"{dev.cc[0]}.{dev.cc[1]} ({dev.arch})", ""),
        ("SMs", str(dev.sms), ""), ("SM clock", f"{dev.clock_khz / 1e3:.0f} MHz", "peak (boost)"),
        ("memory", f"{dev.memory_bytes / 2**30:.1f} GiB", ""),
        ("memory clock / bus", f"{dev.mem_clock_khz / 1e3:.0f} MHz / {dev.bus_width_bits} bit", ""),
        ("L2 cache", f"{dev.l2_bytes / 2**20:.0f} MiB", ""),
        ("shared memory / block", f"{dev.smem_per_block // 1024} KiB (opt-in {dev.smem_optin // 1024} KiB)", ""),
        ("shared memory / SM", f"{dev.smem_per_sm // 1024} KiB", ""),
        ("registers / SM", str(dev.regs_per_sm), ""),
        ("threads / SM", str(dev.max_threads_per_sm), ""),
        ("driver / runtime", f"{dev.driver} / {dev.runtime}", ""),
    ] + dev.derivation()
    if measure:
        facts += [("measured copy bandwidth", f"{doc['measured_copy_tbs']:.2f} TB/s",
                   "device-to-device copy of 1 GiB, bytes read + written, median"),
                  ("measured cuBLAS FP32", f"{doc['measured_cublas_fp32_tflops']:.1f} TFLOP/s",
                   "cupy.matmul 8192^3, median, L2 flushed")]
    for f in facts:
        t.add_row(*f)
    out().print(t)


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
    directory.mkdir(parents=True, exist_ok=True)
    with open(target, "x") as f:  # "x": fail rather than replace a file that appeared meanwhile
        f.write(text)
    load_variant(target, builtin=False)
    shadow = " (it shadows the built-in one)" if name in cat.variants and cat.variants[name].builtin else ""
    out().print(f"wrote [cyan]{escape(str(target))}[/]{shadow}")
    flag = "" if directory == default_user_dir() or str(directory) in env_dirs else f" --kernels-dir {directory}"
    out().print(f"edit it, then:  gemmlab run --variant {name}{flag}\n"
              f"           or:  gemmlab compare --variants {v.name},{name}{flag}")


@cli.command("report")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--markdown", is_flag=True, help="Print the README's markdown table instead.")
@click.option("--versus", metavar="VARIANT", help="One markdown table of VARIANT against cuBLAS over all the files.")
def report_cmd(files, markdown, versus):
    """Show saved `--json` results again, as a table or as markdown."""
    docs = []
    for f in files:
        try:
            doc = json.loads(Path(f).read_text())
            rows = doc["rows"]
        except (ValueError, KeyError, TypeError):
            raise GemmlabError(f"{f} is not a gemmlab results file (a `--json` output)") from None
        docs.append(doc)
        if versus:
            continue
        if markdown:
            click.echo(report.markdown(doc))
        else:
            out().print(report.results_table(rows, report.title_for(doc), speedups="speedup_prev" in rows[0]))
    if versus:
        if any("shape" not in d for d in docs):
            raise GemmlabError("--versus needs `compare --json` files")
        click.echo(report.versus_markdown(docs, versus))


@cli.command()
@click.option("--results", type=click.Path(exists=True, dir_okay=False),
              help="A saved `compare --json` file: show the measured speed-ups beside the predictions.")
@click.option("--markdown", is_flag=True, help="Print the README's markdown table instead.")
@kernels_dir_option
def explain(results, markdown, kernels_dirs):
    """Walk the ladder: each rung's idea, its prediction, and (with --results) what was measured."""
    doc = None
    if results:
        try:
            doc = json.loads(Path(results).read_text())
            doc["rows"]
        except (ValueError, KeyError, TypeError):
            raise GemmlabError(f"{results} is not a gemmlab results file (a `compare --json` output)") from None
    rows = report.predictions(catalog(kernels_dirs).ladder(), doc)
    if markdown:
        click.echo(report.predictions_markdown(rows))
        return
    t = Table(title="the ladder" + (f": measured in {results}" if results else ""), title_justify="left",
              show_lines=True)
    for c in ("rung", "idea and prediction", "predicted", "measured"):
        t.add_column(c, justify="right" if c in ("predicted", "measured") else "left")
    for r in rows:
        text = escape(r["idea"]) + (f"\n[dim]{escape(r['predict'])}[/]" if r["predict"] else "")
        name = escape(r["variant"]) + (f"\n[dim]over {escape(r['parent'])}[/]" if r["parent"] else "")
        t.add_row(name, text, report.speedup_text(r["predict_x"]), report.speedup_text(r["measured_x"]))
    out().print(t)


def main():
    cli(prog_name="gemmlab")


if __name__ == "__main__":
    main()
