"""The tables of the commands that measure across shapes and the machine: suite (and its summary per
variant), scaling, occupancy and profile. The others are in tables.py."""

from __future__ import annotations

from rich.text import Text

from ..results.metrics import is_yardstick
from ..results.records import params_text
from .fit import Column, FitTable, fmt, status_text
from .problem_tables import PROBLEM_COLUMNS
from .tables import peak_text


def _target(r: dict) -> Text:
    t = Text("-" if r["target_pct"] is None else f"{r['target_pct']}%")
    if r["met"] is not None:
        t.append(" met" if r["met"] else " missed", style="green" if r["met"] else "red")
    return t


SUITE_COLUMNS = [
    Column("M x N x K", lambda r: r["shape"], 0, "left"),
    Column("what", lambda r: r.get("shape_name") or "-", 5, "left"),
    Column("variant", lambda r: r["variant"] + (" (auto)" if r.get("chosen_by") == "auto" else ""), 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 3, "left", wrap=True),
    Column("ms", lambda r: fmt(r["ms"], ".3f"), 2),
    Column("TFLOP/s", lambda r: fmt(r["tflops"], ".2f"), 0),
    Column("% peak", lambda r: fmt(r["pct_peak"], ".1f"), 3),
    Column("FLOP/B", lambda r: f"{r['ai']:.1f}", 4),
    Column("bound", lambda r: r["bound"], 4, "left"),
    Column("% of bound", lambda r: fmt(r["pct_bound"], ".1f"), 1),
    Column("x cuBLAS", lambda r: fmt(r["x_cublas"], ".2f"), 0),
    Column("target", _target, 1),
    Column("check", status_text, 0),
]


def _picked(columns: list[Column], headers: set[str]) -> list[Column]:
    return [c for c in columns if c.header in headers]


# Another problem's suite (gemmlab/problems/): the size and its name, then a problem run's columns
PROBLEM_SUITE_COLUMNS = ([Column("size", lambda r: r["shape"], 0, "left")] + _picked(SUITE_COLUMNS, {"what"})
                         + _picked(PROBLEM_COLUMNS, {"variant", "params", "ms", "GB/s", "% copy", "x cupy", "check"}))


def suite_table(doc: dict) -> FitTable:
    dev = doc.get("device", {})
    rows = doc["rows"]
    dtype = doc.get("dtype", "fp32")
    name = (doc.get("suite") or {}).get("name", "")
    when = f" · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}"
    if doc.get("ranks"):  # under a launcher: each shape on one rank's GPU (its rows say which)
        when = f" over {doc['ranks']} ranks ({doc.get('launcher')})" + when
    if doc.get("problem"):  # each size's % copy is of the bandwidth its worker measured
        of = "" if name == doc["problem"] else f" of {doc['problem']}"
        return FitTable(f"suite {name}{of} on {dev.get('name', '?')}{when}", PROBLEM_SUITE_COLUMNS,
                        rows, end_section=lambda i: is_yardstick(rows[i]))
    return FitTable(f"suite {name}{'' if dtype == 'fp32' else ' ' + dtype} on {dev.get('name', '?')}{peak_text(doc)}, "
                    f"copy {doc.get('bandwidth_tbs', 0):.2f} TB/s{when}",
                    SUITE_COLUMNS, rows, end_section=lambda i: is_yardstick(rows[i]))


def yardstick(doc: dict) -> str:
    """What a suite's ratios are over: cuBLAS, or another problem's cupy reference."""
    return "cupy" if doc.get("problem") else "cuBLAS"


def summary_columns(doc: dict) -> list[Column]:
    ref = yardstick(doc)
    return [
        Column("variant", lambda r: r["variant"], 0, "left"),
        Column("shapes", lambda r: str(r["shapes"]), 0),
        Column("failed", lambda r: str(r["failed"]), 1),
        Column(f"geomean x {ref}", lambda r: fmt(r["geomean"], ".3f"), 0),
        Column(f"min x {ref}", lambda r: fmt(r["min"], ".3f"), 0),
        Column(">= 1.00x", lambda r: "-" if r["at_or_above"] is None else f"{100 * r['at_or_above']:.0f}%", 0),
    ]


def suite_view(doc: dict):
    """A suite as `suite` prints it: the table, and under it the summary per variant (if it has one)."""
    if not doc.get("summary"):
        return suite_table(doc)
    from rich.console import Group
    return Group(suite_table(doc), suite_summary_table(doc))


def suite_summary_table(doc: dict) -> FitTable:
    """Per variant over the suite's shapes: geometric mean and minimum of x cuBLAS (x cupy), share at or above it."""
    suite = doc.get("suite") or {}
    return FitTable(f"{suite.get('name', 'suite')}: {suite.get('description', '')} · seed {doc.get('seed')}",
                    summary_columns(doc), doc.get("summary") or [])


OCCUPANCY_COLUMNS = [
    Column("warps / SM", lambda r: str(r["warps_per_sm"]), 0),
    Column("occupancy %", lambda r: f"{r['occupancy_pct']:.1f}", 0),
    Column("blocks / SM", lambda r: str(r["blocks_per_sm"]), 2),
    Column("threads / block", lambda r: str(r["threads_per_block"]), 2),
    Column("reserved smem / block", lambda r: str(r["smem_per_block"]), 3),
    Column("GB/s", lambda r: f"{r['gbs']:,.0f}", 0),
    Column("% of best", lambda r: f"{r['pct_of_best']:.1f}", 0),
]


def occupancy_table(doc: dict) -> FitTable:
    dev = doc.get("device", {})
    return FitTable(f"copy bandwidth against warps per SM on {dev.get('name', '?')} · {doc.get('date', '')[:10]}",
                    OCCUPANCY_COLUMNS, doc["rows"])


SCALING_COLUMNS = [
    Column("N", lambda r: str(r["size"]), 0),
    Column("variant", lambda r: r["variant"], 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 2, "left", wrap=True),
    Column("ms", lambda r: fmt(r["ms"], ".3f"), 1),
    Column("GFLOP/s", lambda r: fmt(r["gflops"], ",.0f"), 0),
    Column("check", status_text, 0),
]


def scaling_table(doc: dict) -> FitTable:
    dev = doc.get("device", {})
    rows = doc["rows"]
    return FitTable(f"size scaling on {dev.get('name', '?')} · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}",
                    SCALING_COLUMNS, rows,
                    end_section=lambda i: i + 1 == len(rows) or rows[i + 1]["size"] != rows[i]["size"])


PROFILE_COLUMNS = [
    Column("metric", lambda m: m["metric"], 0, "left", wrap=True),
    Column("value", lambda m: f"{m['value']:,.2f}" if isinstance(m["value"], float) else str(m["value"]), 0),
    Column("unit", lambda m: m["unit"], 1, "left", wrap=True),
]


def profile_table(found: dict) -> FitTable:
    shape = "x".join(str(found["shape"][k]) for k in "MNK")
    rows = found["metrics"] + [{"metric": f"stall: {s['reason']}", "value": f"{s['cycles_per_instruction']:.2f}",
                                "unit": "cycles per issued instruction"} for s in found["stalls"]]
    return FitTable(f"ncu: {found['variant']} {params_text(found['params'])} at {shape}, first launch",
                    PROFILE_COLUMNS, rows)
