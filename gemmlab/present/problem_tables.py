"""The table of a run of a problem other than GEMM (gemmlab/problems/): time, bandwidth (the bytes the
problem must move over the median time), % of the copy bandwidth measured in the same run (the roofline
of these memory-bound kernels) and the speed against the problem's cupy reference."""

from __future__ import annotations

from ..results.records import BAD, params_text
from .fit import Column, FitTable, fmt, status_text


def _x_ref(r: dict):
    return r["pct_cublas"] / 100 if r.get("pct_cublas") else None


PROBLEM_COLUMNS = [
    Column("variant", lambda r: r["variant"] + (" (user)" if r.get("user") else ""), 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 0, "left", wrap=True),
    Column("ms", lambda r: "invalid" if r["status"] in BAD else fmt(r["ms"], ".3f"), 0),
    Column("GB/s", lambda r: fmt(r.get("gbs"), ",.0f"), 0),
    Column("% copy", lambda r: fmt(r.get("pct_copy"), ".1f"), 1),
    Column("x cupy", lambda r: fmt(_x_ref(r), ".2f"), 0),
    Column("x prev", lambda r: fmt(r.get("speedup_prev"), ".2f"), 2, when="speedups"),
    Column("vs last run", lambda r: r.get("vs_last_text", "-"), 3, wrap=True, when="deltas"),
    Column("check", status_text, 0),
    Column("worst / bound", lambda r: fmt(r.get("err_bound"), ".2g"), 4),
    Column("regs", lambda r: fmt(r["registers"], "d"), 5),
    Column("smem", lambda r: fmt(None if r.get("smem_static") is None
                                 else r["smem_static"] + (r.get("smem_dynamic") or 0), "d"), 6),
    Column("blocks / SM", lambda r: fmt(r["blocks_per_sm"], "d"), 7),
    Column("source", lambda r: r.get("source") or "-", 8, "left", wrap=True),
]


def shape_text(doc: dict) -> str:
    s = doc.get("shape") or {}
    if not s:
        return ""
    return f"{s['M']} x {s['N']}" if doc.get("problem") == "transpose" else f"n = {s['N']:,}"


def title(doc: dict) -> str:
    dev = doc.get("device", {})
    copy = next((r.get("copy_gbs") for r in doc.get("rows", []) if r.get("copy_gbs")), None)
    inputs = f", {doc['inputs']} inputs" if doc.get("inputs") else ""
    return (f"{doc.get('command', '')} {doc.get('problem')} {shape_text(doc)}{inputs} on {dev.get('name', '?')}"
            + (f" (copy {copy:,.0f} GB/s)" if copy else "")
            + f" · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}")


def problem_table(doc: dict, speedups: bool = False) -> FitTable:
    rows = doc.get("rows", [])
    flags = {"speedups"} if speedups else set()
    if any("vs_last" in r for r in rows):
        flags.add("deltas")
    return FitTable(title(doc), PROBLEM_COLUMNS, rows, flags, row_style=lambda r: "red" if r["status"] in BAD else None)


def _name(r: dict) -> str:
    """A row's name in markdown: a rung's, or the reference's with the call it times."""
    return f"{r['variant']} ({r['source']})" if r["variant"] == "cupy" and r.get("source") else r["variant"]


def problem_markdown(doc: dict, sizes: bool = False) -> str:
    """docs/problems.md's table of one saved `compare --problem ... --json` document; with sizes, each row's
    size first (a suite's rows: `shape`, as the problem names it)."""
    lines = ["| variant | params | ms | GB/s | % of copy | x cupy |", "|---|---|---:|---:|---:|---:|"]
    if sizes:
        lines = ["| size " + lines[0], "|---" + lines[1]]
    for r in doc["rows"]:
        size = f"| {r['shape']} " if sizes else ""
        if r["status"] != "PASS":
            lines.append(f"{size}| {_name(r)} | {params_text(r['params'])} | **{r['status']}** | | | |")
            continue
        lines.append(f"{size}| {_name(r)} | {params_text(r['params'])} | {r['ms']:.3f} | {fmt(r.get('gbs'), ',.0f')} | "
                     f"{fmt(r.get('pct_copy'), '.1f')} | {fmt(_x_ref(r), '.2f')} |")
    return "\n".join(lines)


def best_markdown(docs: list[dict]) -> str:
    """One row per saved problem document: its fastest passing rung, against the copy bandwidth and the
    cupy reference of the same run (the README's table)."""
    lines = ["| problem | size | best rung | ms | GB/s | % of copy | x cupy |", "|---|---|---|---:|---:|---:|---:|"]
    for doc in docs:
        rungs = [r for r in doc["rows"] if r["variant"] != "cupy" and r["status"] == "PASS" and r.get("ms")]
        what = doc["problem"] + (f" ({doc['inputs']})" if doc.get("inputs") else "")
        if not rungs:
            lines.append(f"| {what} | {shape_text(doc)} | none passed | | | | |")
            continue
        r = min(rungs, key=lambda r: r["ms"])
        lines.append(f"| {what} | {shape_text(doc)} | {r['variant']} | {r['ms']:.3f} | {fmt(r.get('gbs'), ',.0f')} | "
                     f"{fmt(r.get('pct_copy'), '.1f')} | {fmt(_x_ref(r), '.2f')} |")
    return "\n".join(lines)
