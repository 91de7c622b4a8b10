"""The console's tables: for results, findings, sweeps and suites, the history, the variants, the device
and a kernel's resources, each a list of Columns (present/fit.py); and the terminal map of a failing
row's wrong tiles."""

from __future__ import annotations

from rich.text import Text

from ..results.records import BAD, params_text
from ..templates import show_value
from .fit import Column, FitTable, fmt, speedup_text, status_text


def _smem(r: dict):
    return None if r.get("smem_static") is None else r["smem_static"] + (r.get("smem_dynamic") or 0)


def _compile_text(r: dict) -> str:
    if r.get("compile_ms") is None:
        return "-"
    return "cached" if r.get("cached") else fmt(r["compile_ms"], ".0f")


RESULT_COLUMNS = [
    Column("variant", lambda r: r["variant"] + (" (user)" if r.get("user") else ""), 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 0, "left", wrap=True),
    Column("rank", lambda r: fmt(r.get("rank"), "d"), 1, when="ranks"),  # under a launcher: who measured it
    Column("ms", lambda r: "invalid" if r["status"] in BAD else fmt(r["ms"], ".3f"), 0),
    Column("GFLOP/s", lambda r: fmt(r["tflops"] and r["tflops"] * 1e3, ",.0f"), 1),
    Column("% peak", lambda r: fmt(r["pct_peak"], ".1f"), 3),
    Column("% cuBLAS", lambda r: fmt(r["pct_cublas"], ".1f"), 1),
    Column("x prev", lambda r: fmt(r.get("speedup_prev"), ".2f"), 2, when="speedups"),
    Column("x first", lambda r: fmt(r.get("speedup_first"), ".1f"), 5, when="speedups"),
    Column("vs last run", lambda r: r.get("vs_last_text", "-"), 3, wrap=True, when="deltas"),
    Column("rel err", lambda r: fmt(r["rel_err"], ".1e"), 4),
    Column("check", status_text, 0),
    Column("regs", lambda r: fmt(r["registers"], "d"), 5),
    Column("smem", lambda r: fmt(_smem(r), "d"), 6),
    Column("spills", lambda r: fmt(r["spills"], "d"), 6),
    Column("blocks / SM", lambda r: fmt(r["blocks_per_sm"], "d"), 7),
    Column("compile ms", _compile_text, 7),
]


def results_table(rows: list[dict], title: str, speedups: bool = False) -> FitTable:
    flags = {"speedups"} if speedups else set()
    if any("vs_last" in r for r in rows):
        flags.add("deltas")
    if any("rank" in r for r in rows):
        flags.add("ranks")
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
    Column("compile ms", lambda r: _ok(r, "cached" if r.get("cached") else fmt(r.get("compile_ms"), ".0f")), 2),
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


HISTORY_COLUMNS = [
    Column("id", lambda r: str(r["id"]), 3),
    Column("time (UTC)", lambda r: r["time"][:19].replace("T", " "), 2, "left", wrap=True),
    Column("command", lambda r: r["command"], 4, "left"),
    Column("variant", lambda r: r["variant"], 0, "left"),
    Column("params", lambda r: params_text(r["params"]), 0, "left", wrap=True),
    Column("M x N x K", lambda r: f"{r['M']}x{r['N']}x{r['K']}", 1, "left"),
    Column("status", status_text, 0, "left"),
    Column("ms", lambda r: fmt(r["ms"], ".3f"), 0),
    Column("TFLOP/s", lambda r: fmt(r["tflops"], ".2f"), 1),
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
    from ..gpu.device import DeviceInfo
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


def peak_text(doc: dict) -> str:
    """The peak "% peak" is of, the clock it assumes, and the SM clock NVML measured while the rows were
    timed (the median of their medians): under the power cap the clock, and so the real ceiling, moves."""
    dev, dtype = doc.get("device", {}), doc.get("dtype", "fp32")
    peak = (dev.get("peak_tflops") or {}).get(dtype) or (dev.get("peak_fp32_tflops") if dtype == "fp32" else None)
    if not peak:
        return ""
    text = f"{dtype.upper()} peak {peak:.1f} TFLOP/s" + (f" at {dev['clock_khz'] / 1e3:.0f} MHz" if dev.get("clock_khz") else "")
    measured = sorted(r["clocks"]["sm_mhz"][1] for r in doc.get("rows", []) if r.get("clocks"))
    if measured:
        text += f"; SM clock measured {measured[len(measured) // 2]:.0f} MHz"
    return f" ({text})"


def title_for(doc: dict) -> str:
    dev = doc.get("device", {})
    shape = doc.get("shape", {})
    s = f"{shape.get('M')}x{shape.get('N')}x{shape.get('K')}" if shape else ""
    dtype = doc.get("dtype", "fp32")
    ranks = f" over {doc['ranks']} ranks ({doc.get('launcher')})" if doc.get("ranks") else ""
    return (f"{doc.get('command', '')} {s}{'' if dtype == 'fp32' else ' ' + dtype} on {dev.get('name', '?')}"
            + peak_text(doc) + ranks + f" · {doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}")


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
