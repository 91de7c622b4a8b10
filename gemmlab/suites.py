"""Suites of shapes for `gemmlab suite`, and the roofline bound of each shape.

A suite is a TOML file of shapes (kernels/shapes/: `lab`, the 12 shapes of seed 001's MIT 6.S894 lab 5
with the course's targets; `llm`, the GEMMs of Llama-3 8B and 70B), or shapes drawn at random:
`random_shapes` draws each of M, N and K log-uniformly from 1 to 16384, so that a choice of kernel is
judged on shapes nobody tuned for.

A shape's arithmetic intensity is its FLOPs over the bytes it must move at least once (read A and B in
their type, write C in FP32). Its bound is the lower of the peak and intensity x the measured copy
bandwidth: above the ridge point (peak / bandwidth) the shape is compute-bound, below it memory-bound.
The course's targets are percentages of that bound ("of the maximum available throughput"), which is
why 1 x 3072 x 3072, a matrix-vector product, can have a 40% target. Nothing here needs a GPU.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import GemmlabError
from .results import metrics
from .results.model import ITEM_BYTES, Shape
from .templates import builtin_dir

RANDOM_MAX = 16384          # each of M, N and K drawn from 1 .. RANDOM_MAX
RANDOM_MAX_BYTES = 16 << 30  # and a shape kept only if a run needs at most this much GPU memory


@dataclass(frozen=True)
class Entry:
    shape: Shape
    name: str = ""
    target: int | None = None  # the course's target, % of the roofline bound


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    entries: tuple[Entry, ...]
    dtypes: tuple[str, ...] = ("fp32",)
    source: str = ""  # the file it was read from, or how it was drawn

    def only(self, wanted: list[str]) -> "Suite":
        """The entries whose shape is named ("MxNxK") in `wanted`, all of which must be in the suite."""
        keep = [e for e in self.entries if str(e.shape) in set(wanted)]
        if {str(e.shape) for e in keep} != set(wanted):
            raise GemmlabError("--only names shapes that are not in the suite; it has: "
                               + ", ".join(str(e.shape) for e in self.entries))
        return Suite(self.name, self.description, tuple(keep), self.dtypes, self.source)


def shapes_dir() -> Path:
    return builtin_dir() / "shapes"


def named() -> list[str]:
    """The suites gemmlab ships (kernels/shapes/*.toml)."""
    return sorted(p.stem for p in shapes_dir().glob("*.toml"))


def load(spec: str) -> Suite:
    """A shipped suite by name (`lab`, `llm`) or a suite file's path."""
    path = shapes_dir() / f"{spec}.toml" if spec in named() else Path(spec)
    if not path.is_file():
        raise GemmlabError(f"no suite '{spec}': name one of {', '.join(named())}, or a TOML file of shapes",
                           hint=f"copy {shapes_dir() / 'llm.toml'} to start a file of your own")
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise GemmlabError(f"suite file {path}: {e}") from None
    from .results.records import source_label  # results get committed and shared: no machine's directories
    return parse(data, path.stem, source_label(str(path.resolve())))


def parse(data: dict, name: str, source: str) -> Suite:
    """A suite from a suite file's TOML (see kernels/shapes/llm.toml): `[[shapes]]` with M, N and K (each
    a number or a list: every combination is a shape), an optional name and target; `dtypes`."""
    where = f"suite file {source}"
    dtypes = data.get("dtypes", ["fp32"])
    if not isinstance(dtypes, list) or not dtypes or any(d not in ITEM_BYTES for d in dtypes):
        raise GemmlabError(f"{where}: dtypes is a list of {', '.join(ITEM_BYTES)}, not {dtypes!r}")
    items = data.get("shapes")
    if not isinstance(items, list) or not items:
        raise GemmlabError(f"{where}: no [[shapes]]")
    entries = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict) or not {"M", "N", "K"} <= set(item):
            raise GemmlabError(f"{where}: shape {i} needs M, N and K")
        unknown = set(item) - {"M", "N", "K", "name", "target"}
        if unknown:
            raise GemmlabError(f"{where}: shape {i} has unknown keys {', '.join(sorted(unknown))}")
        dims = [item[k] if isinstance(item[k], list) else [item[k]] for k in "MNK"]
        target = item.get("target")
        if target is not None and (not isinstance(target, (int, float)) or not 0 < target <= 100):
            raise GemmlabError(f"{where}: shape {i}'s target is a percentage, not {target!r}")
        for m in dims[0]:
            for n in dims[1]:
                for k in dims[2]:
                    try:
                        shape = Shape(m, n, k)
                    except GemmlabError as e:
                        raise GemmlabError(f"{where}: shape {i}: {e.message}") from None
                    entries.append(Entry(shape, str(item.get("name", "")), target))
    return Suite(name, str(data.get("description", "")), tuple(entries), tuple(dtypes), source)


def random_shapes(n: int, seed: int, dtype: str = "fp32", max_bytes: int = RANDOM_MAX_BYTES) -> Suite:
    """n shapes, each of M, N and K drawn log-uniformly from 1 to RANDOM_MAX (so that 1-16, 16-256 and
    256-4096 are as likely as each other), keeping those whose run fits in max_bytes of GPU memory.
    The same seed draws the same shapes."""
    if n < 1:
        raise GemmlabError(f"--random takes a positive number of shapes, not {n}")
    rng = np.random.default_rng(seed)
    entries = []
    while len(entries) < n:
        m, nn, k = (int(x) for x in np.exp(rng.uniform(0, math.log(RANDOM_MAX + 1), 3)).astype(int).clip(1, RANDOM_MAX))
        shape = Shape(m, nn, k)
        if shape.bytes_needed(dtype=dtype) <= max_bytes:
            entries.append(Entry(shape))
    return Suite("random", f"{n} shapes drawn log-uniformly from 1..{RANDOM_MAX}",
                 tuple(entries), (dtype,), f"random, seed {seed}")


def min_bytes(shape: Shape, dtype: str = "fp32") -> int:
    """Bytes every algorithm moves at least: A and B read once in their type, C written once in FP32."""
    return ITEM_BYTES[dtype] * (shape.M * shape.K + shape.K * shape.N) + 4 * shape.M * shape.N


def roofline(shape: Shape, peak_flops: float, bandwidth: float, dtype: str = "fp32") -> dict:
    """Intensity (FLOP/byte), the bound (FLOP/s), which ceiling sets it, and the ridge point."""
    context = metrics.Roofline(shape.flops, min_bytes(shape, dtype), peak_flops, bandwidth, None)
    r = metrics.derive_roofline({"tflops": None}, context)
    return {"ai": r["ai"], "bound_flops": metrics.bound_flops(context), "bound": r["bound"],
            "ridge_ai": peak_flops / bandwidth}


def annotate(row: dict, entry: Entry, peak_flops: float, bandwidth: float, cublas_tflops: float | None,
             dtype: str = "fp32") -> dict:
    """Add the suite's columns to a result row: shape, its name, the roofline metrics (results/metrics.py:
    intensity, bound, % of bound, x cuBLAS) and the course's target."""
    shape, target = entry.shape, entry.target
    row.update(shape=str(shape), shape_name=entry.name)
    metrics.derive_roofline(row, metrics.Roofline(shape.flops, min_bytes(shape, dtype), peak_flops, bandwidth,
                                                  cublas_tflops))
    pct_bound = row["pct_bound"]
    row.update(target_pct=target,
               met=None if target is None or metrics.is_reference(row) else bool(pct_bound and pct_bound >= target))
    return row


def _who(r: dict) -> str:
    return "auto" if r.get("chosen_by") == "auto" else r["variant"]


def summary(rows: list[dict]) -> list[dict]:
    """Per variant (auto's choices as one, "auto"; not cuBLAS): over the shapes it ran, the geometric mean
    and the minimum of x cuBLAS, the share of shapes at or above 1.00x, and how many shapes failed (a
    failed shape has no ratio and counts as below)."""
    out = []
    for name in dict.fromkeys(_who(r) for r in rows if r["variant"] != "cuBLAS"):
        mine = [r for r in rows if r["variant"] != "cuBLAS" and _who(r) == name]
        ratios = [r["x_cublas"] for r in mine if r.get("x_cublas")]
        out.append({"variant": name, "shapes": len(mine), "failed": len(mine) - len(ratios),
                    "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
                    "min": min(ratios) if ratios else None,
                    "at_or_above": sum(x >= 1.0 for x in ratios) / len(mine) if mine else None})
    return out
