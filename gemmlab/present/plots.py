"""Plots of saved results (matplotlib, PNG): made from the same documents the tables are, so they are
drawn and tested on a CPU from recorded results.

- sweep_plot: GFLOP/s per configuration of a `gemmlab sweep` (a line over one swept parameter,
  bars for a grid of several), cuBLAS as a dashed line.
- scaling_plot: GFLOP/s against the size for variants, cuBLAS and the CPU numpy baseline.
- occupancy_plot: copy bandwidth against warps per SM, with Little's law's estimate.
- pcie_plot: host <-> device copy rate against size, pageable and pinned, with the PCIe link's rate.
- roofline_plot: the device's ceilings (FP32 peak, copy bandwidth x intensity) with every result of
  a `gemmlab suite` as a point at its shape's arithmetic intensity.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import GemmlabError
from ..templates import show_params


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise GemmlabError("matplotlib is needed for plots", hint="pip install matplotlib") from None
    return plt


def _save(fig, path: Path) -> None:
    """Write the PNG whole or not at all."""
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, path)


def _passing(doc: dict, key: str) -> list[dict]:
    rows = [r for r in doc["rows"] if r["status"] == "PASS" and r.get(key)]
    if not rows:
        raise GemmlabError("nothing passed its check: there is nothing to plot")
    return rows


def _finish(fig, ax, path: Path, title: str, xlabel: str, ylabel: str, legend_size: int = 8) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=legend_size)
    _save(fig, path)
    _pyplot().close(fig)


def _title(doc: dict, what: str) -> str:
    shape = doc.get("shape", {})
    dev = doc.get("device", {}).get("name", "?")
    return f"{what}, {shape.get('M')}x{shape.get('N')}x{shape.get('K')} on {dev} ({doc.get('date', '')[:10]})"


def sweep_plot(doc: dict, path: Path) -> None:
    plt = _pyplot()
    rows = [r for r in _passing(doc, "gflops") if r["variant"] != "cuBLAS"]
    if not rows:
        raise GemmlabError("nothing passed its check: there is nothing to plot")
    cublas = next((r for r in doc["rows"] if r["variant"] == "cuBLAS" and r["gflops"]), None)
    swept = doc.get("swept") or []
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if len(swept) == 1:
        name = swept[0]
        pts = sorted((r["params"][name], r["gflops"]) for r in rows)
        xs = [p[0] for p in pts]
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
        ax.plot(xs if numeric else [str(x) for x in xs], [p[1] for p in pts], "o-", label=rows[0]["variant"])
        if numeric and len(set(xs)) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8:
            ax.set_xscale("log", base=2)
    else:
        rows = sorted(rows, key=lambda r: r["gflops"])[-30:]  # the 30 fastest
        labels = [show_params({k: r["params"][k] for k in swept}) or r["variant"] for r in rows]
        ax.barh(labels, [r["gflops"] for r in rows], label=rows[0]["variant"])
        ax.tick_params(axis="y", labelsize=7)
    if cublas:
        (ax.axhline if len(swept) == 1 else ax.axvline)(cublas["gflops"], ls="--", c="gray", label="cuBLAS")
    axis = (swept[0], "GFLOP/s") if len(swept) == 1 else ("GFLOP/s", "")
    _finish(fig, ax, path, _title(doc, f"sweep of {rows[0]['variant']}"), *axis)


def roofline_plot(doc: dict, path: Path) -> None:
    plt = _pyplot()
    dev, dtype = doc["device"], doc.get("dtype", "fp32")
    peak = ((dev.get("peak_tflops") or {}).get(dtype) or dev["peak_fp32_tflops"]) * 1e12  # the suite's type's
    bw = doc["bandwidth_tbs"] * 1e12
    rows = _passing(doc, "tflops")
    ais = [r["ai"] for r in rows]
    lo, hi = min(ais + [peak / bw]) / 2, max(ais + [peak / bw]) * 2
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(peak, x * bw) / 1e12 for x in xs], "k-", lw=1.5,
            label=f"roofline: {peak / 1e12:.1f} TFLOP/s, {bw / 1e12:.2f} TB/s")
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == name]
        ax.scatter([r["ai"] for r in mine], [r["tflops"] for r in mine], label=name, s=24,
                   marker="x" if name == "cuBLAS" else "o")
    for r in rows:
        if r["variant"] != "cuBLAS":
            ax.annotate(r["shape"], (r["ai"], r["tflops"]), fontsize=6, xytext=(3, -8), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _finish(fig, ax, path, f"roofline on {dev.get('name', '?')} ({doc.get('date', '')[:10]})",
            "arithmetic intensity (FLOP / byte of A, B and C)", "TFLOP/s", legend_size=7)


def occupancy_plot(doc: dict, path: Path) -> None:
    plt = _pyplot()
    rows = doc["rows"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([r["warps_per_sm"] for r in rows], [r["bandwidth"] / 1e12 for r in rows], "o-", label="copy")
    law = doc.get("littles_law") or {}
    if law.get("warps_per_sm_needed"):
        ax.axvline(law["warps_per_sm_needed"], ls="--", c="gray",
                   label=f"Little's law: {law['warps_per_sm_needed']} warps ({law['latency_ns']:.0f} ns latency)")
    _finish(fig, ax, path, f"bandwidth against occupancy on {doc['device']['name']} ({doc.get('date', '')[:10]})",
            "warps per SM", "TB/s (read + write)")


def scaling_plot(doc: dict, path: Path) -> None:
    """GFLOP/s against N (log-log), one line per variant, cuBLAS and the CPU baseline among them."""
    plt = _pyplot()
    rows = _passing(doc, "gflops")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in dict.fromkeys(r["variant"] for r in rows):
        pts = sorted((r["size"], r["gflops"]) for r in rows if r["variant"] == name)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if name != "cuBLAS" else "x--", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _finish(fig, ax, path, f"size scaling on {doc.get('device', {}).get('name', '?')} ({doc.get('date', '')[:10]})",
            "N (M = N = K)", "GFLOP/s")


def error_map_plot(r: dict, path: Path) -> None:
    """A failing row's bad elements per tile of C (tile rows down, tile columns across), as a PNG."""
    plt = _pyplot()
    t = r["tiles"]
    cm, cn = t["cell"]
    fig, ax = plt.subplots(figsize=(7, 7 * len(t["map"]) * cm / max(1, len(t["map"][0]) * cn)))
    rows, cols = len(t["map"]), len(t["map"][0])
    img = ax.imshow(t["map"], cmap="Reds", interpolation="nearest", vmin=0,
                    extent=(0, cols * cn, rows * cm, 0), aspect="auto")
    fig.colorbar(img, ax=ax, label="elements out of bound")
    ax.set_xlabel(f"tile column ({t['tile'][1]} columns of C each)")
    ax.set_ylabel(f"tile row ({t['tile'][0]} rows of C each)")
    ax.set_title(f"{r['variant']} {show_params(r['params'])}: {t['bad']} of {t['total']} tiles wrong", fontsize=9)
    _save(fig, path)
    plt.close(fig)


def dist_plot(docs, path: Path) -> None:
    """Time against GPUs from `gemmlab dist` documents (one or several GPU counts): one bar per schedule
    and GEMM at each count, split into the local GEMMs' time and the communication left exposed (hatched)."""
    from matplotlib.patches import Patch
    plt = _pyplot()
    docs = docs if isinstance(docs, list) else [docs]
    rows = [r for d in docs for r in d["rows"] if r.get("status") == "PASS" and r.get("ms") and "schedule" in r]
    if not rows:
        raise GemmlabError("nothing passed its check: there is nothing to plot")
    series = list(dict.fromkeys(_series(r) for r in rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {name: colours[i % len(colours)] for i, name in enumerate(series)}
    counts = sorted({r["gpus"] for r in rows})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k, n in enumerate(counts):
        here = [r for r in rows if r["gpus"] == n]
        width = 0.8 / len(here)
        for i, r in enumerate(here):
            x = k + (i - (len(here) - 1) / 2) * width
            compute = min(r["compute_ms"], r["ms"])
            c = colour[_series(r)]
            ax.bar(x, compute, width, color=c)
            ax.bar(x, r["ms"] - compute, width, bottom=compute, color="white", edgecolor=c, hatch="///")
    handles = [Patch(color=colour[name], label=name) for name in series]
    handles.append(Patch(facecolor="white", edgecolor="gray", hatch="///", label="communication not hidden"))
    ax.set_xticks(range(len(counts)), [str(n) for n in counts])
    ax.set_ylim(0, 1.35 * max(r["ms"] for r in rows))
    doc = docs[0]
    s = doc.get("shape") or {}
    ax.legend(handles=handles, fontsize=7, ncol=2, loc="upper right")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("ms")
    ax.set_title(f"{s.get('M')}x{s.get('N')}x{s.get('K')} {doc.get('dtype', '')} on "
                 f"{(doc.get('device') or {}).get('name', '?')} ({doc.get('date', '')[:10]})", fontsize=9)
    _save(fig, path)
    plt.close(fig)


def _series(r: dict) -> str:
    name = f"{r['schedule']}, {r['kernel']}"
    return name + (" (overlap)" if r.get("overlap") else "")


def pcie_plot(doc: dict, path: Path) -> None:
    """`gemmlab pcie`: GB/s against the copy's size (log 2), one line per direction and host memory, and
    the PCIe link's rate as a dashed line (or a note that it is unknown)."""
    from .pcie_tables import SERIES, by_size, link_text
    plt = _pyplot()
    rows = by_size(doc)
    if not rows:
        raise GemmlabError("the pcie result has no rows: there is nothing to plot")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for d, m in SERIES:
        pts = [(r["bytes"], r[(d, m)]) for r in rows if r.get((d, m))]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if m == "pinned" else "s--", label=f"{d} {m}")
    ax.set_xscale("log", base=2)
    ax.set_xticks([r["bytes"] for r in rows], [r["size"] for r in rows], rotation=45, fontsize=7)
    rate = (doc.get("link") or {}).get("rate_gbs")
    if rate:
        ax.axhline(rate, color="black", linestyle=":", label=f"link: {rate:.1f} GB/s ({doc['link']['how'].split(':')[0]})")
        ax.axhline(0.9 * rate, color="gray", linestyle=":", linewidth=0.8, label="90% of the link")
    else:
        ax.text(0.02, 0.95, link_text(doc), transform=ax.transAxes, fontsize=8, va="top")
    ax.set_ylim(bottom=0)
    _finish(fig, ax, path, f"host <-> device copies on {doc.get('device', {}).get('name', '?')} "
            f"({doc.get('date', '')[:10]})", "bytes per copy", "GB/s", legend_size=7)
