"""Results as rows of plain values: rich tables for people, JSON for files, markdown for the README.

A row is a dict, so a saved JSON file renders exactly as the live table did (`gemmlab report FILE`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
from pathlib import Path

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from . import __version__
from .runner import Result
from .templates import show_params


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


def meta(command: str, device=None, shape=None, seed=None) -> dict:
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
    return out


def row(r: Result, peak_flops: float, cublas_ms: float | None = None) -> dict:
    """Flatten a Result, with the derived rates. Time and rates are given only for a passing check."""
    ms = r.valid_time
    tflops = r.shape.flops / (ms * 1e-3) / 1e12 if ms else None
    res = r.resources
    d = {
        "variant": r.name, "params": r.params, "source": r.source, "user": r.user,
        "status": r.status, "error": r.error,
        "rel_err": r.check.rel_err if r.check else None,
        "max_abs_err": r.check.max_abs_err if r.check else None,
        "tol": r.check.tol if r.check else None,
        "reference": r.check.reference if r.check else None,
        "unwritten": r.check.unwritten if r.check else None,
        "ms": ms, "ms_min": r.timing.min_ms if ms else None, "ms_max": r.timing.max_ms if ms else None,
        "reps": r.timing.reps if ms else None,
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


def status_text(r: dict) -> Text:
    style = {"PASS": "green", "FAIL": "bold red", "ERROR": "bold red"}.get(r["status"], "")
    return Text(r["status"], style=style)


def results_table(rows: list[dict], title: str, speedups: bool = False) -> Table:
    t = Table(title=title, title_justify="left")
    cols = ["variant", "params", "ms", "GFLOP/s", "% peak", "% cuBLAS"]
    if speedups:
        cols += ["x prev", "x first"]
    cols += ["rel err", "check", "regs", "smem", "spills", "blocks/SM", "compile ms"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("variant", "params") else "right", no_wrap=c != "params")
    for r in rows:
        name = r["variant"] + (" (user)" if r.get("user") else "")
        failed = r["status"] in ("FAIL", "ERROR")
        cells = [escape(name), escape(params_text(r["params"])),
                 "invalid" if failed else _f(r["ms"], ".3f"),
                 _f(r["tflops"] and r["tflops"] * 1e3, ",.0f"), _f(r["pct_peak"], ".1f"), _f(r["pct_cublas"], ".1f")]
        if speedups:
            cells += [_f(r.get("speedup_prev"), ".2f"), _f(r.get("speedup_first"), ".1f")]
        smem = None if r["smem_static"] is None else r["smem_static"] + (r["smem_dynamic"] or 0)
        compile_ms = ("cached" if r["cached"] else _f(r["compile_ms"], ".0f")) if r["compile_ms"] is not None else "-"
        cells += [_f(r["rel_err"], ".1e"), status_text(r), _f(r["registers"], "d"), _f(smem, "d"),
                  _f(r["spills"], "d"), _f(r["blocks_per_sm"], "d"), compile_ms]
        t.add_row(*cells, style="red" if failed else None)
    return t


def title_for(doc: dict) -> str:
    dev = doc.get("device", {})
    shape = doc.get("shape", {})
    s = f"{shape.get('M')}x{shape.get('N')}x{shape.get('K')}" if shape else ""
    peak = dev.get("peak_fp32_tflops")
    return (f"{doc.get('command', '')} {s} on {dev.get('name', '?')}"
            + (f" (FP32 peak {peak:.1f} TFLOP/s)" if peak else "")
            + f" · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}")


def failures(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] in ("FAIL", "ERROR")]


def markdown(doc: dict) -> str:
    """The README's ladder table from a saved `compare --json` document."""
    lines = ["| variant | params | ms | TFLOP/s | % of FP32 peak | % of cuBLAS | x previous |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        if r["status"] not in ("PASS",):
            lines.append(f"| {r['variant']} | {params_text(r['params'])} | {r['status']} | | | | |")
            continue
        lines.append(f"| {r['variant']} | {params_text(r['params'])} | {r['ms']:.3f} | {r['tflops']:.2f} | "
                     f"{r['pct_peak']:.1f} | {_f(r['pct_cublas'], '.1f')} | {_f(r.get('speedup_prev'), '.2f')} |")
    return "\n".join(lines)


def versus_markdown(docs: list[dict], variant: str) -> str:
    """One variant against cuBLAS at each shape of several saved `compare --json` documents: the
    README's table (from the same run, so the ratio is side by side)."""
    lines = [f"| M x N x K | {variant} TFLOP/s | cuBLAS TFLOP/s | {variant} / cuBLAS |", "|---|---:|---:|---:|"]
    for doc in sorted(docs, key=lambda d: (d["shape"]["M"] * d["shape"]["N"] * d["shape"]["K"])):
        rows = {r["variant"]: r for r in doc["rows"]}
        mine, cublas = rows.get(variant), rows.get("cuBLAS")
        if not mine or not cublas:
            continue
        shape = "x".join(str(doc["shape"][k]) for k in "MNK")
        if mine["status"] != "PASS":
            lines.append(f"| {shape} | {mine['status']} | {_f(cublas['tflops'], '.2f')} | - |")
            continue
        lines.append(f"| {shape} | {mine['tflops']:.2f} | {cublas['tflops']:.2f} | "
                     f"{mine['tflops'] / cublas['tflops']:.2f}x |")
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
