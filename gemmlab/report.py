"""Results as rows of plain values: rich tables for people, JSON for files, markdown for the README.

A row is a dict, so a saved JSON file renders exactly as the live table did (`gemmlab report FILE`).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from . import __version__
from .results.model import Result
from .templates import show_params, show_value


def git_commit() -> str | None:
    """The commit of the gemmlab checkout ($GEMMLAB_COMMIT wins: a copied tree has no .git)."""
    if os.environ.get("GEMMLAB_COMMIT"):
        return os.environ["GEMMLAB_COMMIT"]
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def meta(command: str, device=None, shape=None, seed=None, dtype: str = "fp32") -> dict:
    from .compile import nvrtc_version
    out = {"gemmlab": __version__, "command": command,
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "commit": git_commit(), "nvrtc": nvrtc_version()}
    try:
        import cupy
        out["cupy"] = cupy.__version__
    except ImportError:
        pass
    if device is not None:
        out["device"] = device.to_json()
    if shape is not None:
        out["shape"] = {"M": shape.M, "N": shape.N, "K": shape.K}
    if seed is not None:
        out["seed"] = seed
    out["dtype"] = dtype
    return out


def source_label(source: str | None) -> str | None:
    """Where a row's template came from, without this machine's directories (results get committed and
    shared): `kernels/tiled.cu.j2` for a built-in, relative to the gemmlab checkout or the working
    directory when under it, else relative to its own directory (a user's kernels directory: the file
    name). Anything that is not an absolute path (cuBLAS's "cupy.matmul") is kept as it is."""
    if not source or not os.path.isabs(source):
        return source
    from .templates import builtin_dir
    path = Path(source)
    for base, prefix in ((builtin_dir(), "kernels"), (Path(__file__).resolve().parent.parent, ""), (Path.cwd(), "")):
        try:
            rel = path.resolve().relative_to(base.resolve())
        except (ValueError, OSError):
            continue
        return str(Path(prefix) / rel) if prefix else str(rel)
    return path.name


def row(r: Result, peak_flops: float, cublas_ms: float | None = None) -> dict:
    """Flatten a Result, with the derived rates. Time and rates are given only for a passing check."""
    ms = r.valid_time
    tflops = r.shape.flops / (ms * 1e-3) / 1e12 if ms else None
    res = r.resources
    d = {
        "variant": r.name, "params": r.params, "dtype": r.dtype, "source": source_label(r.source), "user": r.user,
        "status": r.status, "error": r.error,
        "rel_err": r.check.rel_err if r.check else None,
        "max_abs_err": r.check.max_abs_err if r.check else None,
        "reference": r.check.reference if r.check else None,
        "unwritten": r.check.unwritten if r.check else None,
        # the element-wise verdict (gemmlab/check.py): how far the worst element went toward its bound,
        # and for a FAIL, where: how many elements, the worst and the first, the tiles, the input set
        "err_bound": r.check.ratio if r.check else None,
        "bad": r.check.bad if r.check else None,
        "check": r.check.summary() if r.check and not r.check.passed else None,
        "worst": r.check.worst if r.check else None, "first": r.check.first if r.check else None,
        "tiles": r.check.tiles if r.check else None,
        "inputs": r.check.inputs if r.check and not r.check.passed else None,
        "clobbered": (r.check.clobbered or None) if r.check else None,
        "samples_ms": r.timing.samples if ms else None, "clocks": r.timing.clocks if ms else None,
        "ms": ms, "ms_min": r.timing.min_ms if ms else None, "ms_max": r.timing.max_ms if ms else None,
        "reps": r.timing.reps if ms else None, "rounds_ms": r.timing.rounds if ms else None,
        "tflops": tflops, "gflops": tflops * 1e3 if tflops else None,
        "pct_peak": 100 * tflops * 1e12 / peak_flops if tflops else None,
        "pct_cublas": 100 * cublas_ms / ms if ms and cublas_ms else None,
        "registers": res.registers if res else None, "smem_static": res.smem if res else None,
        "smem_dynamic": r.geometry.smem if r.geometry else None,
        "stack": res.stack if res else None, "spills": res.spills if res else None,
        "grid": list(r.geometry.grid) if r.geometry else None,
        "block": list(r.geometry.block) if r.geometry else None,
        "blocks_per_sm": r.blocks_per_sm,
        "compile_ms": r.compile_ms, "cached": r.cached,
    }
    return d


def row_from_history(h: dict, peak_flops: float, cublas_ms: float | None = None) -> dict:
    """A row for a result a sweep takes from the history instead of measuring the same kernel again."""
    from .results.check import Check
    from .results.model import Shape, Timing
    r = Result(h["variant"], h["params"], Shape(h["M"], h["N"], h["K"]), source=h["template"] or "",
               dtype=h["dtype"], check=Check(h["rel_err"], math.nan, "history"),
               timing=Timing(h["ms"], h["ms"], h["ms"], 0, samples=h.get("samples")))
    d = row(r, peak_flops, cublas_ms)
    d.update(source_hash=h["source_hash"], vs_last=None, vs_last_text=f"from history #{h['id']}", changed="")
    return d


def add_speedups(rows: list[dict]) -> None:
    """Speed-up of each kernel row over the previous one and over the first (naive) one."""
    kernels = [r for r in rows if r["variant"] != "cuBLAS"]
    first = kernels[0]["ms"] if kernels else None
    prev = None
    for r in kernels:
        r["speedup_prev"] = prev / r["ms"] if prev and r["ms"] else None
        r["speedup_first"] = first / r["ms"] if first and r["ms"] else None
        prev = r["ms"] or prev


def _f(x, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def speedup_text(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def params_text(params: dict) -> str:
    return show_params(params) or "-"


BAD = ("FAIL", "ERROR", "CRASHED", "TIMEOUT")  # statuses whose time is never reported


def status_text(r: dict) -> Text:
    return Text(r["status"], style="green" if r["status"] == "PASS" else "bold red" if r["status"] in BAD else "")


# ---------------------------------------------------------------------------- tables that fit the console
#
# A console table is a list of Columns, each a header, a function from a row to its cell and a priority.
# Printed, it measures its cells against the console's width: long text (params, ideas, errors) is
# folded onto more lines, numbers and statuses are never cut, and when even that is too wide the
# columns of the highest priority numbers are left out (the caption says which; --wide shows all).
# Adding a column to a table is adding one Column to its list.


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[dict], "str | Text"]  # plain text (never markup) or a styled Text
    priority: int = 0  # 0: always shown; the highest numbers are left out first where the width is short
    justify: str = "right"
    wrap: bool = False  # long text: folded onto more lines (down to its longest word) instead of left out
    when: str | None = None  # shown only where the table is made with this flag (e.g. "speedups")


_MAX_WORD = 24  # a wrapped column is never made narrower than its longest word, up to this
_COMFORT = 30  # nor narrower than this while less important columns can be left out instead


def _text(x) -> Text:
    return x if isinstance(x, Text) else Text("" if x is None else str(x))


def _width(t: Text, words: bool = False) -> int:
    parts = t.plain.split() if words else t.plain.split("\n")
    return max((cell_len(p) for p in parts), default=0)


class FitTable:
    """A rich renderable: a table laid out for the width it is printed at (see Column)."""

    def __init__(self, title: str, columns: list[Column], rows: list[dict], flags: set[str] = frozenset(),
                 row_style: Callable[[dict], str | None] | None = None,
                 end_section: Callable[[int], bool] | None = None, show_lines: bool = False,
                 empty: str | None = None):
        self.title, self.rows, self.show_lines = title, rows, show_lines
        self.columns = [c for c in columns if c.when is None or c.when in flags]
        self.cells = [[_text(c.cell(r)) for c in self.columns] for r in rows]
        if not rows and empty:
            self.cells = [[Text(empty, style="green")] + [Text("")] * (len(self.columns) - 1)]
        self.styles = [row_style(r) if row_style else None for r in rows]
        self.end_section = end_section or (lambda i: False)
        self.natural, self.least = [], []
        for j, c in enumerate(self.columns):
            cells = [row[j] for row in self.cells]
            natural = max([_width(x) for x in cells] + [cell_len(c.header)])
            header_word = max(cell_len(w) for w in c.header.split())
            if c.wrap:
                word = max([_width(x, words=True) for x in cells] + [header_word])
                least = min(natural, max(8, min(word, _MAX_WORD)))
            else:  # never cut: as wide as its widest cell; the header may fold at its spaces
                least = max([_width(x) for x in cells] + [header_word])
            self.natural.append(natural)
            self.least.append(least)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @staticmethod
    def _total(widths) -> int:
        widths = list(widths)
        return sum(widths) + 3 * len(widths) + 1  # a cell of padding each side, a rule between and around

    def layout(self, width: int) -> tuple[list[int], dict[int, int]]:
        """(the columns shown, in order; their content widths) at `width` cells. Until the table fits,
        the least important column goes, or a wrapped one is narrowed from a comfortable width to its
        longest word (which counts as a little less than leaving out the next column in importance);
        then what fits again is undone, the most important step first."""
        cols = self.columns
        comfort = [min(self.natural[j], max(self.least[j], _COMFORT)) if c.wrap else self.least[j]
                   for j, c in enumerate(cols)]
        shown, narrowed = set(range(len(cols))), set()

        def now(j):
            return self.least[j] if j in narrowed else comfort[j]

        steps = [(c.priority, j, "drop") for j, c in enumerate(cols) if c.priority > 0]
        steps += [(c.priority + 1.5, j, "narrow") for j, c in enumerate(cols) if c.wrap]
        done = []
        for step in sorted(steps, key=lambda s: (-s[0], -s[1])):
            if self._total(now(k) for k in shown) <= width:
                break
            (shown.discard if step[2] == "drop" else narrowed.add)(step[1])
            done.append(step)
        for _, j, what in reversed(done):  # undo what the room left allows, the most important first
            if what == "drop" and self._total(now(k) for k in shown | {j}) <= width:
                shown.add(j)
            elif what == "narrow" and j in shown and self._total(
                    comfort[k] if k == j else now(k) for k in shown) <= width:
                narrowed.discard(j)
        shown = sorted(shown)
        widths = {j: now(j) for j in shown}
        spare = width - self._total(widths.values())
        for j in shown:  # first unfold the headers of the columns that are never cut
            if not self.columns[j].wrap and spare > 0:
                add = min(spare, self.natural[j] - widths[j])
                widths[j] += add
                spare -= add
        need = {j: self.natural[j] - widths[j] for j in shown if self.columns[j].wrap}
        if spare > 0 and sum(need.values()) > 0:  # then the wrapped ones, each by its share of what it lacks
            total = sum(need.values())
            if total <= spare:
                for j in need:
                    widths[j] += need[j]
            else:
                given = {j: spare * need[j] // total for j in need}
                left = spare - sum(given.values())
                for j in sorted(need, key=lambda j: -need[j]):
                    if left <= 0:
                        break
                    if given[j] < need[j]:
                        given[j] += 1
                        left -= 1
                for j in need:
                    widths[j] += given[j]
        return shown, widths

    def table(self, width: int) -> Table:
        shown, widths = self.layout(width)
        left_out = [self.columns[j].header for j in range(len(self.columns)) if j not in shown]
        caption = (Text(f"not shown at {width} columns: {', '.join(left_out)} (--wide shows every column)",
                        style="dim") if left_out else None)
        t = Table(title=Text(self.title), title_justify="left", show_lines=self.show_lines,
                  caption=caption, caption_justify="left")
        for j in shown:
            c = self.columns[j]
            t.add_column(Text(c.header), justify=c.justify, width=widths[j], overflow="fold")
        for i, cells in enumerate(self.cells):
            t.add_row(*[cells[j] for j in shown], style=self.styles[i] if i < len(self.styles) else None,
                      end_section=self.end_section(i))
        return t

    def __rich_console__(self, console, options):
        yield self.table(options.max_width)


def _smem(r: dict):
    return None if r.get("smem_static") is None else r["smem_static"] + (r.get("smem_dynamic") or 0)


def _compile_text(r: dict) -> str:
    if r.get("compile_ms") is None:
        return "-"
    return "cached" if r.get("cached") else _f(r["compile_ms"], ".0f")


RESULT_COLUMNS = [
    Column("variant", lambda r: r["variant"] + (" (user)" if r.get("user") else ""), 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 0, "left", wrap=True),
    Column("ms", lambda r: "invalid" if r["status"] in BAD else _f(r["ms"], ".3f"), 0),
    Column("GFLOP/s", lambda r: _f(r["tflops"] and r["tflops"] * 1e3, ",.0f"), 1),
    Column("% peak", lambda r: _f(r["pct_peak"], ".1f"), 3),
    Column("% cuBLAS", lambda r: _f(r["pct_cublas"], ".1f"), 1),
    Column("x prev", lambda r: _f(r.get("speedup_prev"), ".2f"), 2, when="speedups"),
    Column("x first", lambda r: _f(r.get("speedup_first"), ".1f"), 5, when="speedups"),
    Column("vs last run", lambda r: r.get("vs_last_text", "-"), 3, wrap=True, when="deltas"),
    Column("rel err", lambda r: _f(r["rel_err"], ".1e"), 4),
    Column("check", status_text, 0),
    Column("regs", lambda r: _f(r["registers"], "d"), 5),
    Column("smem", lambda r: _f(_smem(r), "d"), 6),
    Column("spills", lambda r: _f(r["spills"], "d"), 6),
    Column("blocks / SM", lambda r: _f(r["blocks_per_sm"], "d"), 7),
    Column("compile ms", _compile_text, 7),
]


def results_table(rows: list[dict], title: str, speedups: bool = False) -> FitTable:
    flags = {"speedups"} if speedups else set()
    if any("vs_last" in r for r in rows):
        flags.add("deltas")
    return FitTable(title, RESULT_COLUMNS, rows, flags, row_style=lambda r: "red" if r["status"] in BAD else None)


FINDING_COLUMNS = [
    Column("count", lambda f: f"{f['count']:,}", 0),
    Column("what", lambda f: f["what"], 0, "left", wrap=True),
    Column("where (template line)", lambda f: f["where"], 0, "left", wrap=True),
    Column("code", lambda f: f["code"], 1, "left", wrap=True),
    Column("first seen", lambda f: f["example"], 3, "left", wrap=True),
    Column("detail", lambda f: f["detail"], 2, "left", wrap=True),
]


def findings_table(found: dict) -> FitTable:
    """compute-sanitizer's findings, merged, at their template lines."""
    shape = "x".join(str(found["shape"][k]) for k in "MNK")
    return FitTable(f"{found['command']}: {found['variant']} {params_text(found['params'])} at {shape}",
                    FINDING_COLUMNS, found["findings"], row_style=lambda f: "red", show_lines=True,
                    empty="nothing found")


def _idea_and_prediction(r: dict) -> Text:
    t = Text(r["idea"])
    if r["predict"]:
        t.append("\n" + r["predict"], style="dim")
    return t


def _rung(r: dict) -> Text:
    t = Text(r["variant"])
    if r["parent"]:
        t.append(f"\nover {r['parent']}", style="dim")
    return t


EXPLAIN_COLUMNS = [
    Column("rung", _rung, 0, "left"),
    Column("idea and prediction", _idea_and_prediction, 0, "left", wrap=True),
    Column("predicted", lambda r: speedup_text(r["predict_x"]), 0),
    Column("measured", lambda r: speedup_text(r["measured_x"]), 1),
]


def explain_table(rows: list[dict], results: str | None) -> FitTable:
    return FitTable("the ladder" + (f": measured in {results}" if results else ""), EXPLAIN_COLUMNS, rows,
                    show_lines=True)


def _ok(r: dict, text: str):
    return text if r["result"] == "ok" else ""


BUILD_COLUMNS = [
    Column("variant", lambda r: r["variant"], 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 0, "left", wrap=True),
    Column("regs", lambda r: _ok(r, str(r.get("registers"))), 0),
    Column("smem", lambda r: _ok(r, str(r.get("smem"))), 1),
    Column("stack", lambda r: _ok(r, str(r.get("stack"))), 2),
    Column("spills", lambda r: Text(str(r["spills"]), style="red" if r["spills"] else "")
           if r["result"] == "ok" else "", 0),
    Column("compile ms", lambda r: _ok(r, "cached" if r.get("cached") else _f(r.get("compile_ms"), ".0f")), 2),
    Column("result", lambda r: Text("ok", style="green") if r["result"] == "ok" else Text("FAIL", style="bold red"),
           0, "left"),
]


def build_table(rows: list[dict], arch: str) -> FitTable:
    return FitTable(f"build for {arch}", BUILD_COLUMNS, rows)


def _span(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return str(min(values)) if min(values) == max(values) else f"{min(values)}-{max(values)}"


BUILD_SUMMARY_COLUMNS = [
    Column("variant", lambda s: s["variant"], 0, "left"),
    Column("configs", lambda s: f"{s['configs']:,}", 0),
    Column("ok", lambda s: Text(f"{s['ok']:,}", style="green" if s["ok"] else ""), 0),
    Column("failed", lambda s: Text(f"{s['failed']:,}", style="bold red" if s["failed"] else ""), 0),
    Column("regs", lambda s: s["regs"], 1),
    Column("smem", lambda s: s["smem"], 2),
    Column("spilling", lambda s: Text(f"{s['spilling']:,}", style="red" if s["spilling"] else ""), 1),
    Column("compiled", lambda s: f"{s['compiled']:,}", 3),
    Column("cached", lambda s: f"{s['cached']:,}", 3),
    Column("compile s", lambda s: f"{s['compile_s']:,.0f}", 2),
]


def build_summary_table(rows: list[dict], arch: str) -> FitTable:
    """A large build, one line per variant: how many configurations built, failed and spilled, and
    the range of their registers and shared memory."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["variant"], []).append(r)
    summary = []
    for name, rs in by.items():
        ok = [r for r in rs if r["result"] == "ok"]
        summary.append({"variant": name, "configs": len(rs), "ok": len(ok), "failed": len(rs) - len(ok),
                        "regs": _span([r["registers"] for r in ok]), "smem": _span([r["smem"] for r in ok]),
                        "spilling": sum(1 for r in ok if r["spills"]),
                        "compiled": sum(1 for r in ok if not r["cached"]), "cached": sum(1 for r in ok if r["cached"]),
                        "compile_s": sum(r["compile_ms"] or 0 for r in ok) / 1000})
    return FitTable(f"build for {arch}: {len(rows):,} configurations", BUILD_SUMMARY_COLUMNS, summary)




def findings_markdown(found: dict) -> str:
    """A saved `run --sanitize --json` document as the README's table."""
    lines = ["| count | what | where | code |", "|---:|---|---|---|"]
    for f in found["findings"]:
        code = (f["code"] or "-").replace("|", "\\|")  # CUDA has || and the places are joined by |
        lines.append(f"| {f['count']:,} | {f['what']} | {f['where']} | `{code}` |")
    return "\n".join(lines)


def _target(r: dict) -> Text:
    t = Text("-" if r["target_pct"] is None else f"{r['target_pct']}%")
    if r["met"] is not None:
        t.append(" met" if r["met"] else " missed", style="green" if r["met"] else "red")
    return t


SUITE_COLUMNS = [
    Column("M x N x K", lambda r: r["shape"], 0, "left"),
    Column("variant", lambda r: r["variant"], 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 3, "left", wrap=True),
    Column("ms", lambda r: _f(r["ms"], ".3f"), 2),
    Column("TFLOP/s", lambda r: _f(r["tflops"], ".2f"), 0),
    Column("% peak", lambda r: _f(r["pct_peak"], ".1f"), 3),
    Column("FLOP/B", lambda r: f"{r['ai']:.1f}", 4),
    Column("bound", lambda r: r["bound"], 4, "left"),
    Column("% of bound", lambda r: _f(r["pct_bound"], ".1f"), 1),
    Column("x cuBLAS", lambda r: _f(r["x_cublas"], ".2f"), 0),
    Column("target", _target, 1),
    Column("check", status_text, 0),
]


def suite_table(doc: dict) -> FitTable:
    dev = doc.get("device", {})
    rows = doc["rows"]
    return FitTable(f"suite on {dev.get('name', '?')} (FP32 peak {dev.get('peak_fp32_tflops', 0):.1f} TFLOP/s, "
                    f"copy {doc.get('bandwidth_tbs', 0):.2f} TB/s) · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}",
                    SUITE_COLUMNS, rows, end_section=lambda i: rows[i]["variant"] == "cuBLAS")


def suite_markdown(doc: dict) -> str:
    """The README's suite table from a saved `suite --json` document."""
    lines = ["| M x N x K | variant | TFLOP/s | % of peak | FLOP/B | bound | % of bound | x cuBLAS | target |",
             "|---|---|---:|---:|---:|---|---:|---:|---|"]
    for r in doc["rows"]:
        target = "-" if r["target_pct"] is None else f"{r['target_pct']}%" + (
            "" if r["met"] is None else " met" if r["met"] else " **missed**")
        tflops = _f(r["tflops"], ".2f") if r["status"] == "PASS" else f"**{r['status']}**"
        lines.append(f"| {r['shape']} | {r['variant']} | {tflops} | {_f(r['pct_peak'], '.1f')} | {r['ai']:.1f} | "
                     f"{r['bound']} | {_f(r['pct_bound'], '.1f')} | {_f(r['x_cublas'], '.2f')} | {target} |")
    return "\n".join(lines)


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
    Column("ms", lambda r: _f(r["ms"], ".3f"), 1),
    Column("GFLOP/s", lambda r: _f(r["gflops"], ",.0f"), 0),
    Column("check", status_text, 0),
]


def scaling_table(doc: dict) -> FitTable:
    dev = doc.get("device", {})
    rows = doc["rows"]
    return FitTable(f"size scaling on {dev.get('name', '?')} · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}",
                    SCALING_COLUMNS, rows,
                    end_section=lambda i: i + 1 == len(rows) or rows[i + 1]["size"] != rows[i]["size"])


def scaling_markdown(doc: dict) -> str:
    """GFLOP/s, one row per size, one column per variant (the README's table)."""
    names = list(dict.fromkeys(r["variant"] for r in doc["rows"]))
    sizes = sorted({r["size"] for r in doc["rows"]})
    cell = {(r["size"], r["variant"]): (_f(r["gflops"], ",.0f") if r["status"] == "PASS" else r["status"]) for r in doc["rows"]}
    lines = ["| N | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for n in sizes:
        lines.append(f"| {n} | " + " | ".join(cell.get((n, v), "-") for v in names) + " |")
    return "\n".join(lines)


def occupancy_markdown(doc: dict) -> str:
    """The README's table from a saved `occupancy --json` document."""
    lines = ["| warps / SM | occupancy | GB/s | % of best |", "|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        lines.append(f"| {r['warps_per_sm']} | {r['occupancy_pct']:.1f}% | {r['gbs']:,.0f} | {r['pct_of_best']:.1f} |")
    law = doc.get("littles_law") or {}
    if law:
        lines.append(f"\nLittle's law: 512 bytes in flight per warp at 1 warp per SM gives a latency of "
                     f"{law['latency_ns']:.0f} ns, so the best rate needs {law['bytes_in_flight'] / 2**20:.2f} MiB in "
                     f"flight: about {law['warps_per_sm_needed']} warps per SM.")
    return "\n".join(lines)


# Saved documents of the commands whose rows are not a ladder's: `gemmlab report` shows them as the command did.
VIEWS = {"suite": (suite_table, suite_markdown), "scaling": (scaling_table, scaling_markdown),
         "occupancy": (occupancy_table, occupancy_markdown)}


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


HISTORY_COLUMNS = [
    Column("id", lambda r: str(r["id"]), 3),
    Column("time (UTC)", lambda r: r["time"][:19].replace("T", " "), 2, "left", wrap=True),
    Column("command", lambda r: r["command"], 4, "left"),
    Column("variant", lambda r: r["variant"], 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 0, "left", wrap=True),
    Column("M x N x K", lambda r: f"{r['M']}x{r['N']}x{r['K']}", 1, "left"),
    Column("status", status_text, 0, "left"),
    Column("ms", lambda r: _f(r["ms"], ".3f"), 0),
    Column("TFLOP/s", lambda r: _f(r["tflops"], ".2f"), 1),
    Column("source", lambda r: (r["source_hash"] or "-")[:8], 5, "left"),
    Column("device", lambda r: r["device"] or "-", 4, "left", wrap=True),
    Column("commit", lambda r: r["commit_id"] or "-", 5, "left"),
]


def history_table(rows: list[dict], title: str) -> FitTable:
    return FitTable(title, HISTORY_COLUMNS, rows)


def _choices_text(v) -> str:
    return "\n".join(f"{n}={show_value(p.default)}" + (f" [{', '.join(map(show_value, p.choices))}]" if p.choices else "")
                     for n, p in v.params.items()) or "-"


def _variant_source(v) -> Text:
    if v.get("broken"):
        return Text("broken", style="red")
    t = Text("built-in") if v["builtin"] else Text(v["source"], style="cyan")
    if v.get("shadows"):
        t.append(f"\nshadows {v['shadows']}", style="yellow")
    return t


VARIANT_COLUMNS = [
    Column("variant", lambda v: Text(v["name"], style="red" if v.get("broken") else "bold"), 0, "left"),
    Column("parent", lambda v: v["parent"] or ("" if v.get("broken") else "-"), 3, "left"),
    Column("idea", lambda v: Text(v["idea"], style="red" if v.get("broken") else ""), 1, "left", wrap=True),
    Column("dtypes", lambda v: " ".join(v["dtypes"]), 2, "left", wrap=True),
    Column("parameters (default [choices])", lambda v: v["params"], 0, "left", wrap=True),
    Column("source", _variant_source, 4, "left", wrap=True),
]


def variants_table(ladder: list, broken: dict, title: str) -> FitTable:
    """`gemmlab list`: the variants in ladder order, then the templates that do not load (in red)."""
    rows = [{"name": v.name, "parent": v.parent, "idea": v.idea, "dtypes": list(v.dtypes), "params": _choices_text(v),
             "builtin": v.builtin, "source": str(v.path), "shadows": str(v.shadows) if v.shadows else None}
            for v in ladder]
    rows += [{"name": name, "parent": None, "idea": e.message, "dtypes": [], "params": "", "broken": True}
             for name, e in broken.items()]
    return FitTable(title, VARIANT_COLUMNS, rows, show_lines=True)


FACT_COLUMNS = [
    Column("fact", lambda f: f[0], 0, "left", wrap=True),
    Column("value", lambda f: f[1], 0),
    Column("how", lambda f: f[2], 1, "left", wrap=True),
]


def device_info(doc: dict):
    """A DeviceInfo again from its `device --json` document (or a results file's "device")."""
    from dataclasses import fields
    from .gpu.device import DeviceInfo
    values = {f.name: doc[f.name] for f in fields(DeviceInfo)}
    values["cc"] = tuple(values["cc"])
    return DeviceInfo(**values)


def device_table(doc: dict) -> FitTable:
    """`gemmlab device` from its JSON document, so that a saved one shows the same table."""
    dev = device_info(doc)
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
    if doc.get("measured_copy_tbs") is not None:
        facts.append(("measured copy bandwidth", f"{doc['measured_copy_tbs']:.2f} TB/s",
                      "device-to-device copy of 1 GiB, bytes read + written, median"))
    if doc.get("measured_cublas_fp32_tflops") is not None:
        facts.append(("measured cuBLAS FP32", f"{doc['measured_cublas_fp32_tflops']:.1f} TFLOP/s",
                      "cupy.matmul 8192^3, median, L2 flushed"))
    return FitTable(f"device {dev.index}: {dev.name}", FACT_COLUMNS, facts)


RESOURCE_COLUMNS = [
    Column("resource", lambda f: f[0], 0, "left"),
    Column("value", lambda f: str(f[1]), 0),
]


def resources_table(row: dict) -> FitTable:
    """`gemmlab show --what resources` from its row (variant, params, arch, threads, resources)."""
    facts = [("registers / thread", row["registers"]), ("threads / block", row["threads"]),
             ("static shared memory / block (B)", row["smem"]), ("stack frame (B)", row["stack"]),
             ("spill stores (B)", row["spill_stores"]), ("spill loads (B)", row["spill_loads"]),
             ("barriers", row["barriers"]),
             ("compile ms", "cached" if row["cached"] else f"{row['compile_ms']:.0f}")]
    return FitTable(f"{row['variant']} {params_text(row['params'])} for {row['arch']}", RESOURCE_COLUMNS, facts)


def title_for(doc: dict) -> str:
    dev = doc.get("device", {})
    shape = doc.get("shape", {})
    s = f"{shape.get('M')}x{shape.get('N')}x{shape.get('K')}" if shape else ""
    dtype = doc.get("dtype", "fp32")
    peak = (dev.get("peak_tflops") or {}).get(dtype) or (dev.get("peak_fp32_tflops") if dtype == "fp32" else None)
    return (f"{doc.get('command', '')} {s}{'' if dtype == 'fp32' else ' ' + dtype} on {dev.get('name', '?')}"
            + (f" ({dtype.upper()} peak {peak:.1f} TFLOP/s)" if peak else "")
            + f" · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}")


def failures(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] in BAD]


def failure_text(r: dict) -> str:
    """Why a row has no time, in one line."""
    if r["error"]:
        return r["error"]
    if r.get("check"):
        return r["check"]
    if r["unwritten"]:
        return f"{r['unwritten']} elements of C never written"
    if r.get("tol") is not None:  # a file written before the element-wise check
        return f"relative error {r['rel_err']:.2e} > tolerance {r['tol']:.0e}"
    return "wrong result"


def clock_note(r: dict) -> str | None:
    """'SM clock 1410-1980 MHz (median 1755) while timed, held down by: power cap', only for a row whose
    clock NVML saw held down (gemmlab/clocks.py)."""
    c = r.get("clocks")
    if not c or not c.get("throttle"):
        return None
    lo, mid, hi = c["sm_mhz"]
    return f"SM clock {lo}-{hi} MHz (median {mid}) while timed, held down by: {', '.join(c['throttle'])}"


def error_map(r: dict) -> Text:
    """A failing row's bad tiles as a map of C for the terminal: one character a cell (a cell is one tile,
    or a block of tiles where C has more than fit), red where any element is out of bound."""
    t = r["tiles"]
    cm, cn = t["cell"]
    out = Text()
    out.append(f"{r['variant']}: {t['bad']} of {t['total']} tiles of {t['tile'][0]} x {t['tile'][1]} hold "
               f"elements out of bound", style="bold")
    out.append(f" (C is {t['grid'][0]} x {t['grid'][1]} tiles" +
               (f"; a cell is {cm} x {cn} tiles" if (cm, cn) != (1, 1) else "") + ")\n")
    width = len(str((len(t["map"]) - 1) * cm))
    for i, cells in enumerate(t["map"]):
        out.append(f"{i * cm:>{width}} ", style="dim")
        for n in cells:
            out.append("█" if n else "·", style="red" if n else "dim")
        out.append("\n")
    first = r.get("first")
    if first:
        out.append(f"first bad element ({first['i']}, {first['j']}) is in tile "
                   f"({first['i'] // t['tile'][0]}, {first['j'] // t['tile'][1]})", style="dim")
    return out


def markdown(doc: dict) -> str:
    """The README's ladder table from a saved `compare --json` document."""
    lines = [f"| variant | params | ms | TFLOP/s | % of {doc.get('dtype', 'fp32').upper()} peak | % of cuBLAS | x previous |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        if r["status"] not in ("PASS",):
            why = failure_text(r).splitlines()[0].replace("|", "/")
            lines.append(f"| {r['variant']} | {params_text(r['params'])} | **{r['status']}**: {why} | | | | |")
            continue
        lines.append(f"| {r['variant']} | {params_text(r['params'])} | {r['ms']:.3f} | {r['tflops']:.2f} | "
                     f"{r['pct_peak']:.1f} | {_f(r['pct_cublas'], '.1f')} | {_f(r.get('speedup_prev'), '.2f')} |")
    return "\n".join(lines)


def versus_markdown(docs: list[dict], variant: str) -> str:
    """One variant against cuBLAS at each shape of several saved `compare --json` documents: the
    README's table (from the same run, so the ratio is side by side)."""
    lines = [f"| M x N x K | {variant} TFLOP/s | cuBLAS TFLOP/s | {variant} / cuBLAS |", "|---|---:|---:|---:|"]
    for doc in sorted(docs, key=lambda d: (d["shape"]["M"] * d["shape"]["N"] * d["shape"]["K"], d.get("dtype", "fp32"))):
        rows = {r["variant"]: r for r in doc["rows"]}
        mine, cublas = rows.get(variant), rows.get("cuBLAS")
        if not mine or not cublas:
            continue
        shape = "x".join(str(doc["shape"][k]) for k in "MNK")
        if doc.get("dtype", "fp32") != "fp32":
            shape += f" {doc['dtype']}"
        if mine["status"] != "PASS":
            lines.append(f"| {shape} | {mine['status']} | {_f(cublas['tflops'], '.2f')} | - |")
            continue
        lines.append(f"| {shape} | {mine['tflops']:.2f} | {cublas['tflops']:.2f} | "
                     f"{mine['tflops'] / cublas['tflops']:.3f}x |")  # the third digit decides a goal of 1.00x
    return "\n".join(lines)


def predictions(variants, doc: dict | None = None) -> list[dict]:
    """Each rung's predicted speed-up over its parent beside the one measured in a saved `compare --json`
    document (None where the document lacks the rung or its parent, or either failed its check)."""
    ms = {r["variant"]: r["ms"] for r in (doc or {}).get("rows", []) if r["status"] == "PASS" and r["ms"]}
    out = []
    for v in variants:
        measured = ms[v.parent] / ms[v.name] if v.name in ms and v.parent in ms else None
        out.append({"variant": v.name, "parent": v.parent, "idea": v.idea, "predict": v.predict,
                    "predict_x": v.predict_x, "measured_x": measured})
    return out


def predictions_markdown(rows: list[dict]) -> str:
    """The README's table of predicted against measured speed-ups."""
    lines = ["| rung | over | predicted | measured |", "|---|---|---:|---:|"]
    for r in rows:
        if r["parent"]:
            lines.append(f"| {r['variant']} | {r['parent']} | {speedup_text(r['predict_x'])} | {speedup_text(r['measured_x'])} |")
    return "\n".join(lines)


def dump(doc: dict) -> str:
    return json.dumps(doc, indent=2, default=str)


def _cell(v) -> str:
    """A CSV cell: parameters as `TILE=32 REG=8`, lists as `x y z`, nothing as empty."""
    if v is None:
        return ""
    if isinstance(v, dict):
        return show_params(v)
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return show_value(v)


def csv_text(rows: list[dict]) -> str:
    """Rows of dicts as CSV, one column per key in the order first seen."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` whole or not at all: a crash mid-write leaves the previous version."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
