"""Saved results again: report (tables, markdown, --versus) and explain."""

from __future__ import annotations


import click
from ..present import lab_tables, markdown, tables

from ..api import catalog
from ..errors import GemmlabError
from ..files import new_file
from .common import (_is_device, _is_profile, _load_results, _plot, _print_rows, cli, kernels_dir_option, out,
                     output_format, output_options)


@cli.command("report")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the README's markdown table instead.")
@click.option("--versus", metavar="VARIANT", help="One markdown table of VARIANT against cuBLAS over all the files.")
@click.option("--against", metavar="ROW", default="cuBLAS", show_default=True,
              help="With --versus: the row to compare with (cuBLASLt, Triton, or another variant).")
@click.option("--best", is_flag=True, help="Problems besides GEMM: one markdown table, each file's fastest rung against cupy.")
@click.option("--suites", "summaries", is_flag=True,
              help="`suite` files: one markdown table of each file's summary (geomean, minimum, share at 1.00x).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="`dist` files: one plot of time against GPUs over all of them (PNG, SVG or PDF by suffix).")
@output_options
def report_cmd(files, as_markdown, versus, against, best, summaries, plot_path, as_json, as_csv):
    """Show saved `--json` results again (of any command that writes them): as tables, markdown, or all
    their rows as JSON or CSV."""
    fmt = output_format(as_json, as_csv, as_markdown)
    docs = [_load_results(f) for f in files]
    if plot_path:
        if any(d.get("command") != "dist" for d in docs):
            raise GemmlabError("--plot draws time against GPUs from `gemmlab dist --json` files; not all of these are")
        _plot("dist_plot", docs, new_file(plot_path, "--plot"))
    if against != "cuBLAS" and not versus:
        raise GemmlabError("--against names the row that --versus compares with; give --versus VARIANT too")
    if best:
        if fmt in ("json", "csv") or versus:
            raise GemmlabError(f"--best prints a markdown table; it does not go with {'--versus' if versus else '--' + fmt}")
        if any(not d.get("problem") for d in docs):
            raise GemmlabError("--best needs `compare --problem ... --json` files of problems besides gemm")
        from ..present.problem_tables import best_markdown
        click.echo(best_markdown(docs))
        return
    if summaries:
        if fmt in ("json", "csv") or versus or best:
            raise GemmlabError("--suites prints one markdown table; it goes with no other form")
        if any(d.get("command") != "suite" for d in docs):
            raise GemmlabError("--suites needs `gemmlab suite --json` files; not all of these are")
        from ..suites import summary  # a file cut short (a time limit) has rows but no summary yet
        click.echo(markdown.suites_markdown([dict(d, summary=d.get("summary") or summary(d["rows"])) for d in docs]))
        return
    if versus:
        if fmt in ("json", "csv"):
            raise GemmlabError(f"--versus prints a markdown table; it does not go with --{fmt}")
        if any("shape" not in d or "rows" not in d for d in docs):
            raise GemmlabError("--versus needs `compare --json` files")
        have = sorted({r["variant"] for d in docs for r in d["rows"]})
        for name in (versus, against):
            if name not in have:
                raise GemmlabError(f"no file has a row of {name}", hint="they have: " + ", ".join(have))
        click.echo(markdown.versus_markdown(docs, versus, against))
        return
    if fmt in ("json", "csv"):
        rows = [dict(r, file=f) for f, d in zip(files, docs)
                for r in (d.get("rows", d.get("findings")) or ([d] if _is_device(d) else d.get("metrics", [])))]
        _print_rows(docs[0] if len(docs) == 1 else docs, rows, fmt, None)
        return
    if as_markdown and all(_is_profile(d) for d in docs):  # ncu's metrics side by side, one column a file
        click.echo(markdown.profile_markdown(docs))
        return
    for doc in docs:
        if _is_device(doc) or _is_profile(doc):
            if as_markdown:
                raise GemmlabError("--markdown is for results tables; a device file has none (profile files: give only those)")
            out().print(tables.device_table(doc) if _is_device(doc) else lab_tables.profile_table(doc))
        elif "findings" in doc:  # a `run --sanitize --json` document
            click.echo(markdown.findings_markdown(doc)) if as_markdown else out().print(tables.findings_table(doc))
        elif doc.get("command") in markdown.VIEWS:  # suite, scaling, occupancy: their own columns
            table, md = markdown.VIEWS[doc["command"]]
            click.echo(md(doc)) if as_markdown else out().print(table(doc))
        elif as_markdown:
            click.echo(markdown.markdown(doc))
        elif doc.get("problem"):
            from ..present.problem_tables import problem_table
            out().print(problem_table(doc, speedups=bool(doc["rows"]) and "speedup_prev" in doc["rows"][0]))
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
