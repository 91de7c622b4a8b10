"""The tables of `gemmlab pcie` (gpu/pcie.py): GB/s per size, one column per direction and host memory,
then the plateau from 1 MB up against the PCIe link's rate; as the console shows them and as markdown."""

from __future__ import annotations

from .fit import Column, FitTable, fmt

SERIES = [(d, m) for d in ("H2D", "D2H") for m in ("pageable", "pinned")]


def by_size(doc: dict) -> list[dict]:
    """One row per size: its label and the GB/s of each direction and memory (None where not measured)."""
    out = {}
    for r in doc["rows"]:
        row = out.setdefault(r["bytes"], {"bytes": r["bytes"], "size": r["size"]})
        row[(r["direction"], r["memory"])] = r["gbs"]
    return [out[n] for n in sorted(out)]


def link_text(doc: dict) -> str:
    """The link's rate and how it was worked out, or why it is unknown."""
    link = doc.get("link") or {}
    if link.get("rate_gbs") is None:
        return f"link rate unknown: {link.get('why', 'not recorded')}"
    now = f"; NVML read gen {link['gen']} x{link['width']} just after the copies" if "gen" in link else ""
    return f"link {link['rate_gbs']:.2f} GB/s each way ({link['how']}){now}"


PCIE_COLUMNS = [Column("size", lambda r: r["size"], 0)] + [
    Column(f"{d} {m} GB/s", lambda r, k=(d, m): fmt(r.get(k), ".2f"), 0) for d, m in SERIES]

PLATEAU_COLUMNS = [
    Column("direction", lambda p: p["direction"], 0, "left"),
    Column("memory", lambda p: p["memory"], 0, "left"),
    Column("sizes", lambda p: str(p["sizes"]), 1),
    Column("median GB/s", lambda p: f"{p['gbs']:.2f}", 0),
    Column("% of link", lambda p: fmt(p["pct_link"], ".1f"), 0),
    Column("within 10%", lambda p: "-" if p["within_10pct"] is None else "yes" if p["within_10pct"] else "no", 0),
]


def pcie_view(doc: dict):
    """`gemmlab pcie` as it prints: the rates per size, then the plateau."""
    from rich.console import Group
    from rich.text import Text
    dev = doc.get("device", {})
    rates = FitTable(f"host <-> device copies on {dev.get('name', '?')}, median of {doc.get('reps', '?')} · "
                     f"{doc.get('date', '')[:10]} · commit {doc.get('commit') or '?'}", PCIE_COLUMNS, by_size(doc))
    plateau = FitTable("the plateau: the median from 1 MB up", PLATEAU_COLUMNS, doc.get("plateau") or [])
    return Group(rates, plateau, Text(link_text(doc)))


def pcie_markdown(doc: dict) -> str:
    """The docs' tables: GB/s per size, a blank line, the plateau against the link's rate."""
    lines = ["| size | " + " | ".join(f"{d} {m} GB/s" for d, m in SERIES) + " |", "|---:|" + "---:|" * len(SERIES)]
    for r in by_size(doc):
        lines.append(f"| {r['size']} | " + " | ".join(fmt(r.get(k), ".2f") for k in SERIES) + " |")
    lines += ["", "| direction | memory | median GB/s from 1 MB | % of link | within 10% |", "|---|---|---:|---:|---|"]
    for p in doc.get("plateau") or []:
        within = "-" if p["within_10pct"] is None else "yes" if p["within_10pct"] else "**no**"
        lines.append(f"| {p['direction']} | {p['memory']} | {p['gbs']:.2f} | {fmt(p['pct_link'], '.1f')} | {within} |")
    lines += ["", link_text(doc) + "."]
    return "\n".join(lines)
