"""Plots of saved results (matplotlib, PNG): made from the same documents the tables are, so they are
drawn and tested on a CPU from recorded results.

- sweep_plot: GFLOP/s per configuration of a `gemmlab sweep` (a line over one swept parameter,
  bars for a grid of several), cuBLAS as a dashed line.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import GemmlabError
from .templates import show_params


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


def _title(doc: dict, what: str) -> str:
    shape = doc.get("shape", {})
    dev = doc.get("device", {}).get("name", "?")
    return f"{what}, {shape.get('M')}x{shape.get('N')}x{shape.get('K')} on {dev} ({doc.get('date', '')[:10]})"


def sweep_plot(doc: dict, path: Path) -> None:
    plt = _pyplot()
    rows = [r for r in doc["rows"] if r["variant"] != "cuBLAS" and r["status"] == "PASS"]
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
        ax.set_xlabel(name)
        if numeric and len(set(xs)) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8:
            ax.set_xscale("log", base=2)
    else:
        rows = sorted(rows, key=lambda r: r["gflops"])[-30:]  # the 30 fastest
        labels = [show_params({k: r["params"][k] for k in swept}) or r["variant"] for r in rows]
        ax.barh(labels, [r["gflops"] for r in rows], label=rows[0]["variant"])
        ax.tick_params(axis="y", labelsize=7)
    if cublas:
        (ax.axhline if len(swept) == 1 else ax.axvline)(cublas["gflops"], ls="--", c="gray", label="cuBLAS")
    ax.set_ylabel("GFLOP/s") if len(swept) == 1 else ax.set_xlabel("GFLOP/s")
    ax.set_title(_title(doc, f"sweep of {rows[0]['variant']}"), fontsize=9)
    ax.legend()
    _save(fig, path)
    plt.close(fig)
