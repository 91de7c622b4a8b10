"""The markdown tables of the README and docs/, made from saved result documents (`gemmlab report
--markdown`, `--versus`, `explain --markdown`)."""

from __future__ import annotations

from ..results.records import failure_text, params_text
from .fit import fmt, speedup_text
from .dist_tables import dist_markdown, dist_table
from .lab_tables import occupancy_table, scaling_table, suite_view, yardstick
from .pcie_tables import pcie_markdown, pcie_view
from .problem_tables import problem_markdown


def findings_markdown(found: dict) -> str:
    """A saved `run --sanitize --json` document as the README's table."""
    lines = ["| count | what | where | code |", "|---:|---|---|---|"]
    for f in found["findings"]:
        code = (f["code"] or "-").replace("|", "\\|")  # CUDA has || and the places are joined by |
        lines.append(f"| {f['count']:,} | {f['what']} | {f['where']} | `{code}` |")
    return "\n".join(lines)


def suite_markdown(doc: dict) -> str:
    """The README's suite table from a saved `suite --json` document (another problem's: a problem run's
    table with each row's size), and the summary per variant under it."""
    lines = problem_markdown(doc, sizes=True).splitlines() if doc.get("problem") else _gemm_suite_lines(doc)
    if doc.get("summary"):  # per variant over the shapes
        ref = yardstick(doc)
        lines += ["", f"| variant | shapes | failed | geomean x {ref} | min x {ref} | at or above 1.00x |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {x['variant']} | {x['shapes']} | {x['failed']} | {fmt(x['geomean'], '.3f')} | "
                  f"{fmt(x['min'], '.3f')} | {fmt(x['at_or_above'] and 100 * x['at_or_above'], '.0f')}% |"
                  for x in doc["summary"]]
    return "\n".join(lines)


def suites_markdown(docs: list[dict]) -> str:
    """Saved `suite --json` documents in one table (`report --suites`): per file and variant, the suite (a
    random draw with its seed, so the caption's command can be run again), the input type and the summary."""
    ref = yardstick(docs[0])
    lines = [f"| suite | type | variant | shapes | failed | geomean x {ref} | min x {ref} | at or above 1.00x |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for d in docs:
        name = (d.get("suite") or {}).get("name") or "suite"
        name = f"random, seed {d['seed']}" if name == "random" else name
        lines += [f"| {name} | {d.get('dtype', 'fp32')} | {x['variant']} | {x['shapes']} | {x['failed']} | "
                  f"{fmt(x['geomean'], '.3f')} | {fmt(x['min'], '.3f')} | "
                  f"{fmt(x['at_or_above'] and 100 * x['at_or_above'], '.0f')}% |" for x in d["summary"]]
    return "\n".join(lines)


def _gemm_suite_lines(doc: dict) -> list[str]:
    lines = ["| M x N x K | variant | TFLOP/s | % of peak | FLOP/B | bound | % of bound | x cuBLAS | target |",
             "|---|---|---:|---:|---:|---|---:|---:|---|"]
    for r in doc["rows"]:
        target = "-" if r["target_pct"] is None else f"{r['target_pct']}%" + (
            "" if r["met"] is None else " met" if r["met"] else " **missed**")
        tflops = fmt(r["tflops"], ".2f") if r["status"] == "PASS" else f"**{r['status']}**"
        lines.append(f"| {r['shape']} | {r['variant']} | {tflops} | {fmt(r['pct_peak'], '.1f')} | {r['ai']:.1f} | "
                     f"{r['bound']} | {fmt(r['pct_bound'], '.1f')} | {fmt(r['x_cublas'], '.2f')} | {target} |")
    return lines


def scaling_markdown(doc: dict) -> str:
    """GFLOP/s, one row per size, one column per variant (the README's table)."""
    names = list(dict.fromkeys(r["variant"] for r in doc["rows"]))
    sizes = sorted({r["size"] for r in doc["rows"]})
    cell = {(r["size"], r["variant"]): (fmt(r["gflops"], ",.0f") if r["status"] == "PASS" else r["status"]) for r in doc["rows"]}
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


def profile_markdown(docs: list[dict]) -> str:
    """Saved `profile --json` documents side by side: one row per metric (in the first one's order), one
    column per document, headed by its variant and parameters."""
    def cell(v) -> str:
        if not isinstance(v, (int, float)):
            return str(v)
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
    heads = [f"{d['variant']} {params_text(d.get('params') or {})}".strip() for d in docs]
    values = [{m["metric"]: m for m in d["metrics"]} for d in docs]
    names = list(dict.fromkeys(m["metric"] for d in docs for m in d["metrics"]))
    lines = ["| metric | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(docs)]
    for name in names:
        unit = next(v[name]["unit"] for v in values if name in v)
        label = name if not unit or unit in name else f"{name} ({unit})"
        lines.append(f"| {label} | " + " | ".join(cell(v[name]["value"]) if name in v else "-" for v in values) + " |")
    return "\n".join(lines)


# Saved documents of the commands whose rows are not a ladder's: `gemmlab report` shows them as the command did.
VIEWS = {"suite": (suite_view, suite_markdown), "scaling": (scaling_table, scaling_markdown),
         "occupancy": (occupancy_table, occupancy_markdown), "dist": (dist_table, dist_markdown),
         "pcie": (pcie_view, pcie_markdown)}


def markdown(doc: dict) -> str:
    """The README's ladder table from a saved `compare --json` document (another problem's: its own)."""
    if doc.get("problem"):
        return problem_markdown(doc)
    lines = [f"| variant | params | ms | TFLOP/s | % of {doc.get('dtype', 'fp32').upper()} peak | % of cuBLAS | x previous |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        if r["status"] not in ("PASS",):
            why = failure_text(r).splitlines()[0].replace("|", "/")
            lines.append(f"| {r['variant']} | {params_text(r['params'])} | **{r['status']}**: {why} | | | | |")
            continue
        lines.append(f"| {r['variant']} | {params_text(r['params'])} | {r['ms']:.3f} | {r['tflops']:.2f} | "
                     f"{r['pct_peak']:.1f} | {fmt(r['pct_cublas'], '.1f')} | {fmt(r.get('speedup_prev'), '.2f')} |")
    return "\n".join(lines)


def versus_markdown(docs: list[dict], variant: str, against: str = "cuBLAS") -> str:
    """One variant against a reference row (cuBLAS unless `against` names another row: cuBLASLt, or a
    variant) at each shape of several saved `compare --json` or `run --json` documents: the README's table
    (from the same run, so the ratio is side by side). An FP8 row's label names its scales (SCALE)."""
    lines = [f"| M x N x K | {variant} TFLOP/s | {against} TFLOP/s | {variant} / {against} |", "|---|---:|---:|---:|"]

    def scale(doc):
        return next((r["params"].get("SCALE", "") for r in doc["rows"]
                     if r["variant"] == variant and isinstance(r.get("params"), dict)), "")

    order = {"tensor": 0, "row": 1, "block": 2}
    for doc in sorted(docs, key=lambda d: (d["shape"]["M"] * d["shape"]["N"] * d["shape"]["K"], d.get("dtype", "fp32"),
                                           order.get(scale(d), 3))):
        rows = {r["variant"]: r for r in doc["rows"]}
        mine, ref = rows.get(variant), rows.get(against)
        if not mine or not ref:
            continue
        shape = "x".join(str(doc["shape"][k]) for k in "MNK")
        if doc.get("dtype", "fp32") != "fp32":
            shape += f" {doc['dtype']}"
        if scale(doc):
            shape += f", {scale(doc)} scales"
        if mine["status"] != "PASS" or ref["status"] != "PASS":
            mine_text = f"{mine['tflops']:.2f}" if mine["status"] == "PASS" else mine["status"]
            ref_text = f"{ref['tflops']:.2f}" if ref["status"] == "PASS" else ref["status"]
            lines.append(f"| {shape} | {mine_text} | {ref_text} | - |")
            continue
        lines.append(f"| {shape} | {mine['tflops']:.2f} | {ref['tflops']:.2f} | "
                     f"{mine['tflops'] / ref['tflops']:.3f}x |")  # the third digit decides a goal of 1.00x
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
