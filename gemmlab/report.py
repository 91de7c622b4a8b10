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
from pathlib import Path

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from . import __version__
from .runner import Result
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
        "tol": r.check.tol if r.check else None,
        "reference": r.check.reference if r.check else None,
        "unwritten": r.check.unwritten if r.check else None,
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
    from .runner import TOLERANCES, Check, Shape, Timing
    r = Result(h["variant"], h["params"], Shape(h["M"], h["N"], h["K"]), source=h["template"] or "",
               dtype=h["dtype"], check=Check(h["rel_err"], math.nan, TOLERANCES[h["dtype"]], "history"),
               timing=Timing(h["ms"], h["ms"], h["ms"], 0))
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


def results_table(rows: list[dict], title: str, speedups: bool = False) -> Table:
    t = Table(title=title, title_justify="left")
    cols = ["variant", "params", "ms", "GFLOP/s", "% peak", "% cuBLAS"]
    if speedups:
        cols += ["x prev", "x first"]
    deltas = any("vs_last" in r for r in rows)
    if deltas:
        cols += ["vs last run"]
    cols += ["rel err", "check", "regs", "smem", "spills", "blocks/SM", "compile ms"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("variant", "params") else "right", no_wrap=c != "params")
    for r in rows:
        name = r["variant"] + (" (user)" if r.get("user") else "")
        failed = r["status"] in BAD
        cells = [escape(name), escape(params_text(r["params"])),
                 "invalid" if failed else _f(r["ms"], ".3f"),
                 _f(r["tflops"] and r["tflops"] * 1e3, ",.0f"), _f(r["pct_peak"], ".1f"), _f(r["pct_cublas"], ".1f")]
        if speedups:
            cells += [_f(r.get("speedup_prev"), ".2f"), _f(r.get("speedup_first"), ".1f")]
        if deltas:
            cells.append(escape(r.get("vs_last_text", "-")))
        smem = None if r["smem_static"] is None else r["smem_static"] + (r["smem_dynamic"] or 0)
        compile_ms = ("cached" if r["cached"] else _f(r["compile_ms"], ".0f")) if r["compile_ms"] is not None else "-"
        cells += [_f(r["rel_err"], ".1e"), status_text(r), _f(r["registers"], "d"), _f(smem, "d"),
                  _f(r["spills"], "d"), _f(r["blocks_per_sm"], "d"), compile_ms]
        t.add_row(*cells, style="red" if failed else None)
    return t


def findings_table(found: dict) -> Table:
    """compute-sanitizer's findings, merged, at their template lines."""
    shape = "x".join(str(found["shape"][k]) for k in "MNK")
    t = Table(title=f"{found['command']}: {found['variant']} {params_text(found['params'])} at {shape}",
              title_justify="left", show_lines=True)
    for c in ("count", "what", "where (template line)", "code", "first seen", "detail"):
        t.add_column(c, justify="right" if c == "count" else "left", overflow="fold")
    for f in found["findings"]:
        t.add_row(str(f["count"]), escape(f["what"]), escape(f["where"]), escape(f["code"]),
                  escape(f["example"]), escape(f["detail"]), style="red")
    if not found["findings"]:
        t.add_row("0", "[green]nothing found[/]", "", "", "", "")
    return t


def explain_table(rows: list[dict], results: str | None) -> Table:
    t = Table(title="the ladder" + (f": measured in {results}" if results else ""), title_justify="left",
              show_lines=True)
    for c in ("rung", "idea and prediction", "predicted", "measured"):
        t.add_column(c, justify="right" if c in ("predicted", "measured") else "left")
    for r in rows:
        text = escape(r["idea"]) + (f"\n[dim]{escape(r['predict'])}[/]" if r["predict"] else "")
        name = escape(r["variant"]) + (f"\n[dim]over {escape(r['parent'])}[/]" if r["parent"] else "")
        t.add_row(name, text, speedup_text(r["predict_x"]), speedup_text(r["measured_x"]))
    return t


def build_table(rows: list[dict], arch: str) -> Table:
    t = Table(title=f"build for {arch}", title_justify="left")
    for c in ("variant", "params", "regs", "smem", "stack", "spills", "compile ms", "result"):
        t.add_column(c, justify="left" if c in ("variant", "params", "result") else "right")
    for r in rows:
        if r["result"] != "ok":
            t.add_row(escape(r["variant"]), escape(params_text(r["params"])), "", "", "", "", "", "[bold red]FAIL[/]")
            continue
        t.add_row(escape(r["variant"]), escape(params_text(r["params"])), str(r["registers"]), str(r["smem"]),
                  str(r["stack"]), f"[red]{r['spills']}[/]" if r["spills"] else "0",
                  "cached" if r["cached"] else f"{r['compile_ms']:.0f}", "[green]ok[/]")
    return t


def findings_markdown(found: dict) -> str:
    """A saved `run --sanitize --json` document as the README's table."""
    lines = ["| count | what | where | code |", "|---:|---|---|---|"]
    for f in found["findings"]:
        code = (f["code"] or "-").replace("|", "\\|")  # CUDA has || and the places are joined by |
        lines.append(f"| {f['count']:,} | {f['what']} | {f['where']} | `{code}` |")
    return "\n".join(lines)


def suite_table(doc: dict) -> Table:
    dev = doc.get("device", {})
    t = Table(title=f"suite on {dev.get('name', '?')} (FP32 peak {dev.get('peak_fp32_tflops', 0):.1f} TFLOP/s, "
                    f"copy {doc.get('bandwidth_tbs', 0):.2f} TB/s) · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}",
              title_justify="left")
    for c in ("M x N x K", "variant", "params", "ms", "TFLOP/s", "% peak", "FLOP/B", "bound", "% of bound",
              "x cuBLAS", "target", "check"):
        t.add_column(c, justify="left" if c in ("M x N x K", "variant", "params", "bound") else "right",
                     no_wrap=c != "params")
    for r in doc["rows"]:
        target = "-" if r["target_pct"] is None else f"{r['target_pct']}%"
        if r["met"] is not None:
            target += " [green]met[/]" if r["met"] else " [red]missed[/]"
        t.add_row(r["shape"], escape(r["variant"]), escape(params_text(r["params"])), _f(r["ms"], ".3f"),
                  _f(r["tflops"], ".2f"), _f(r["pct_peak"], ".1f"), f"{r['ai']:.1f}", r["bound"],
                  _f(r["pct_bound"], ".1f"), _f(r["x_cublas"], ".2f"), target, status_text(r),
                  end_section=r["variant"] == "cuBLAS")
    return t


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


def occupancy_table(doc: dict) -> Table:
    dev = doc.get("device", {})
    t = Table(title=f"copy bandwidth against warps per SM on {dev.get('name', '?')} · {doc.get('date', '')[:10]}",
              title_justify="left")
    for c in ("warps / SM", "occupancy %", "blocks / SM", "threads / block", "reserved smem / block", "GB/s",
              "% of best"):
        t.add_column(c, justify="right")
    for r in doc["rows"]:
        t.add_row(str(r["warps_per_sm"]), f"{r['occupancy_pct']:.1f}", str(r["blocks_per_sm"]),
                  str(r["threads_per_block"]), str(r["smem_per_block"]), f"{r['gbs']:,.0f}", f"{r['pct_of_best']:.1f}")
    return t


def scaling_table(doc: dict) -> Table:
    dev = doc.get("device", {})
    t = Table(title=f"size scaling on {dev.get('name', '?')} · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}",
              title_justify="left")
    for c in ("N", "variant", "params", "ms", "GFLOP/s", "check"):
        t.add_column(c, justify="left" if c in ("variant", "params") else "right", no_wrap=c != "params")
    rows = doc["rows"]
    for i, r in enumerate(rows):
        last_of_size = i + 1 == len(rows) or rows[i + 1]["size"] != r["size"]
        t.add_row(str(r["size"]), escape(r["variant"]), escape(params_text(r["params"])), _f(r["ms"], ".3f"),
                  _f(r["gflops"], ",.0f"), status_text(r), end_section=last_of_size)
    return t


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


def profile_table(found: dict) -> Table:
    shape = "x".join(str(found["shape"][k]) for k in "MNK")
    t = Table(title=f"ncu: {found['variant']} {params_text(found['params'])} at {shape}, first launch",
              title_justify="left")
    for c in ("metric", "value", "unit"):
        t.add_column(c, justify="right" if c == "value" else "left")
    for m in found["metrics"]:
        v = m["value"]
        t.add_row(m["metric"], f"{v:,.2f}" if isinstance(v, float) else str(v), m["unit"])
    for s in found["stalls"]:
        t.add_row(f"stall: {s['reason']}", f"{s['cycles_per_instruction']:.2f}", "cycles per issued instruction")
    return t


def history_table(rows: list[dict], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for c in ("id", "time (UTC)", "command", "variant", "params", "M x N x K", "status", "ms", "TFLOP/s",
              "source", "device", "commit"):
        t.add_column(c, justify="right" if c in ("id", "ms", "TFLOP/s") else "left",
                     no_wrap=c not in ("params", "device"))
    for r in rows:
        t.add_row(str(r["id"]), r["time"][:19].replace("T", " "), r["command"], escape(r["variant"]),
                  escape(params_text(r["params"])), f"{r['M']}x{r['N']}x{r['K']}", status_text(r),
                  _f(r["ms"], ".3f"), _f(r["tflops"], ".2f"), (r["source_hash"] or "-")[:8],
                  escape(r["device"] or "-"), escape(r["commit_id"] or "-"))
    return t


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
    if r["unwritten"]:
        return f"{r['unwritten']} elements of C never written"
    return f"relative error {r['rel_err']:.2e} > tolerance {r['tol']:.0e}"


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
