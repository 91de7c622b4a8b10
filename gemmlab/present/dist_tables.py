"""The tables of `gemmlab dist`: a schedule per row (time, rates, scaling, the communication left
exposed), or with --measure NCCL's bandwidth per size; and the same as markdown for docs/. Under the
table, a row's timeline where it has one (--timeline): a rank per line."""

from __future__ import annotations

from rich.text import Text

from ..results.records import params_text
from .fit import Column, FitTable, fmt, speedup_text, status_text


def gemm_text(r: dict) -> str:
    return r["kernel"] if r["kernel"] == "cuBLAS" else f"{r['kernel']} {params_text(r['params'])}"


def _pct(x, unit: str = "") -> str:
    return "-" if x is None else f"{100 * x:.1f}{unit}"


COLUMNS = [
    Column("schedule", lambda r: r["schedule"], 0, "left"),
    Column("GEMM", gemm_text, 1, "left", wrap=True),
    Column("overlap", lambda r: "yes" if r["overlap"] else "no", 2),
    Column("GPUs", lambda r: str(r["gpus"]), 0),
    Column("ms", lambda r: fmt(r["ms"], ".3f"), 0),
    Column("TFLOP/s", lambda r: fmt(r["tflops"], ".1f"), 0),
    Column("per GPU", lambda r: fmt(r["tflops_per_gpu"], ".1f"), 1),
    Column("% peak per GPU", lambda r: fmt(r["pct_peak"], ".1f"), 1),
    Column("efficiency %", lambda r: _pct(r["efficiency"]), 0),
    Column("x baseline", lambda r: speedup_text(r["x_baseline"]) if r["x_baseline"] else "-", 0),
    Column("compute ms", lambda r: fmt(r["compute_ms"], ".3f"), 2),
    Column("exposed ms", lambda r: fmt(r["exposed_ms"], ".3f"), 0),
    Column("MB sent per GPU", lambda r: fmt(r["sent_mb"], ",.1f"), 2),
    Column("GB/s", lambda r: fmt(r["comm_gbs"], ",.0f"), 3),
    Column("check", status_text, 0),
]

BANDWIDTH_COLUMNS = [
    Column("operation", lambda r: r["op"], 0, "left"),
    Column("MB per rank", lambda r: f"{r['mb_per_rank']:,}", 0),
    Column("us", lambda r: f"{r['us']:,.1f}", 0),
    Column("algbw GB/s", lambda r: f"{r['algbw_gbs']:,.1f}", 1),
    Column("busbw GB/s", lambda r: f"{r['busbw_gbs']:,.1f}", 0),
]


def title(doc: dict) -> str:
    dev = (doc.get("device") or {}).get("name", "?")
    if doc.get("measure"):
        return f"NCCL bandwidth between {doc.get('gpus')} GPUs ({dev}) · {doc.get('date', '')[:10]}"
    s = doc.get("shape") or {}
    return (f"{s.get('M')}x{s.get('N')}x{s.get('K')} {doc.get('dtype', '')} over {doc.get('gpus')} GPUs ({dev}) · "
            f"{doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}")


def dist_table(doc: dict):
    if doc.get("measure"):
        return FitTable(title(doc), BANDWIDTH_COLUMNS, doc["rows"])
    table = FitTable(title(doc), COLUMNS, doc["rows"], empty="no rows")
    timelines = [timeline_table(r) for r in doc["rows"] if r.get("timeline")]
    if not timelines:
        return table
    from rich.console import Group
    return Group(table, *timelines)


def timeline_table(r: dict) -> FitTable:
    """A row's timeline: per rank, the median ms from a repetition's start on the comm stream to each event."""
    chunks = max(len(t["chunks_ms"]) for t in r["timeline"])
    columns = [Column("rank", lambda t: str(t["rank"]), 0), Column("barrier", lambda t: fmt(t["barrier_ms"], ".3f"), 0)]
    columns += [Column(f"chunk {c}", lambda t, c=c: fmt((list(t["chunks_ms"]) + [None] * chunks)[c], ".3f"), 0)
                for c in range(chunks)]
    columns += [Column("GEMM start", lambda t: fmt(t["gemm_start_ms"], ".3f"), 0),
                Column("GEMM end", lambda t: fmt(t["gemm_end_ms"], ".3f"), 0)]
    return FitTable(f"{r['schedule']} with {r['kernel']}: ms after a repetition's start on the comm stream, "
                    f"median of {r.get('reps', '?')} repetitions", columns, r["timeline"])


def dist_markdown(doc: dict) -> str:
    """docs/dist.md's tables, from a saved `gemmlab dist --json` document."""
    if doc.get("measure"):
        lines = ["| operation | MB per rank | us | algbw GB/s | busbw GB/s |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {r['op']} | {r['mb_per_rank']:,} | {r['us']:,.1f} | {r['algbw_gbs']:,.1f} | {r['busbw_gbs']:,.1f} |"
                  for r in doc["rows"]]
        return "\n".join(lines)
    lines = ["| schedule | GEMM | GPUs | ms | TFLOP/s | per GPU | % peak per GPU | efficiency | x baseline | exposed ms "
             "| MB sent per GPU |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        schedule = r["schedule"] + (" (overlap)" if r["overlap"] else "")
        if r["status"] != "PASS":
            why = (r.get("check") or r.get("error") or "").splitlines()[0:1]
            lines.append(f"| {schedule} | {r['kernel']} | {r['gpus']} | **{r['status']}** {''.join(why)} | | | | | | | |")
            continue
        lines.append(f"| {schedule} | {r['kernel']} | {r['gpus']} | {r['ms']:.3f} | {r['tflops']:.1f} | "
                     f"{r['tflops_per_gpu']:.1f} | {r['pct_peak']:.1f} | {_pct(r['efficiency'], '%')} | "
                     f"{speedup_text(r['x_baseline']) if r['x_baseline'] else '-'} | {r['exposed_ms']:.3f} | "
                     f"{r['sent_mb']:,.1f} |")
    params = {gemm_text(r) for r in doc["rows"] if r["kernel"] != "cuBLAS"}
    return "\n".join(lines + [f"\n{p}" for p in sorted(params)])


def fault_text(doc: dict) -> Text | None:
    return Text(doc["fault"], style="bold red") if doc.get("fault") else None
