"""Suites of shapes for `gemmlab suite`, and the roofline bound of each shape.

A suite is a TOML file of shapes (kernels/shapes/: `lab`, the 12 shapes of seed 001's MIT 6.S894 lab 5
with the course's targets; `llm`, the GEMMs of Llama-3 8B and 70B), or shapes drawn at random:
`random_shapes` draws each of M, N and K log-uniformly from 1 to 16384, so that a choice of kernel is
judged on shapes nobody tuned for. A problem other than GEMM (gemmlab/problems/) has its sizes in its
declaration (`suite_sizes`: `sizes`), a suite file may say `problem = "scan"` and give its sizes, and `random_shapes`
draws n log-uniformly from 1 to 2^28 (M and N of a matrix problem as GEMM's).

A shape's arithmetic intensity is its FLOPs over the bytes it must move at least once (read A and B in
their type, write C in FP32). Its bound is the lower of the peak and intensity x the measured copy
bandwidth: above the ridge point (peak / bandwidth) the shape is compute-bound, below it memory-bound.
The course's targets are percentages of that bound ("of the maximum available throughput"), which is
why 1 x 3072 x 3072, a matrix-vector product, can have a 40% target. Nothing here needs a GPU.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import problems
from .errors import GemmlabError
from .results import metrics
from .results.model import ITEM_BYTES, Shape
from .templates import builtin_dir

RANDOM_MAX = 16384          # each of M, N and K drawn from 1 .. RANDOM_MAX
RANDOM_MAX_BYTES = 16 << 30  # and a shape kept only if a run needs at most this much GPU memory
RANDOM_MAX_N = 1 << 28      # n of a vector problem drawn from 1 .. RANDOM_MAX_N


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
    problem: str = "gemm"

    def label(self, shape: Shape) -> str:
        """A shape as the suite names it: "MxNxK", or as its problem does (n, or MxN)."""
        return str(shape) if self.problem == "gemm" else problems.get(self.problem).label(shape)

    def only(self, wanted: list[str]) -> "Suite":
        """The entries whose shape is named (as `label` names it) in `wanted`, all of which must be in the suite."""
        keep = [e for e in self.entries if self.label(e.shape) in set(wanted)]
        if {self.label(e.shape) for e in keep} != set(wanted):
            raise GemmlabError("--only names shapes that are not in the suite; it has: "
                               + ", ".join(self.label(e.shape) for e in self.entries))
        return replace(self, entries=tuple(keep))


def shapes_dir() -> Path:
    return builtin_dir() / "shapes"


def named() -> list[str]:
    """The suites gemmlab ships (kernels/shapes/*.toml)."""
    return sorted(p.stem for p in shapes_dir().glob("*.toml"))


def sizes(problem: str) -> Suite:
    """The sizes of a problem other than GEMM, from its declaration."""
    decl = problems.get(problem)
    shapes = decl.suite_shapes()
    return Suite(problem, f"{len(shapes)} sizes, {decl.describe(shapes[0])} to {decl.describe(shapes[-1])}",
                 tuple(Entry(s) for s in shapes), source="gemmlab/problems", problem=problem)


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


NEEDS = {"MNK": "M, N and K", "MN": "M and N", "N": "N"}  # a suite file's shape: GEMM's, a matrix's, a vector's


def parse(data: dict, name: str, source: str) -> Suite:
    """A suite from a suite file's TOML (see kernels/shapes/llm.toml): `[[shapes]]` with M, N and K (each
    a number or a list: every combination is a shape), an optional name and target; `dtypes`. With
    `problem = "NAME"` (a problem other than GEMM), its shapes: N, the n of a vector problem, or M and N
    of a matrix one, with an optional name (no target, no dtypes: its inputs are its own)."""
    where = f"suite file {source}"
    problem = data.get("problem", "gemm")
    if problem not in problems.NAMES:
        raise GemmlabError(f"{where}: problem is one of {', '.join(problems.NAMES)}, not {problem!r}")
    if problem == "gemm":
        dims_needed, keys = "MNK", {"name", "target"}
    else:
        dims_needed, keys = "N" if problems.get(problem).vector else "MN", {"name"}
        if "dtypes" in data:
            raise GemmlabError(f"{where}: dtypes are GEMM's; {problem} has inputs of its own")
    dtypes = data.get("dtypes", ["fp32"])
    if not isinstance(dtypes, list) or not dtypes or any(d not in ITEM_BYTES for d in dtypes):
        raise GemmlabError(f"{where}: dtypes is a list of {', '.join(ITEM_BYTES)}, not {dtypes!r}")
    items = data.get("shapes")
    if not isinstance(items, list) or not items:
        raise GemmlabError(f"{where}: no [[shapes]]")
    entries = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict) or not set(dims_needed) <= set(item):
            raise GemmlabError(f"{where}: shape {i} needs {NEEDS[dims_needed]}")
        unknown = set(item) - set(dims_needed) - keys
        if unknown:
            raise GemmlabError(f"{where}: shape {i} has unknown keys {', '.join(sorted(unknown))}")
        dims = [v if isinstance(v, list) else [v] for v in (item.get(k, 1) for k in "MNK")]  # K = 1: a problem's
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
    return Suite(name, str(data.get("description", "")), tuple(entries), tuple(dtypes), source, problem)


def random_shapes(n: int, seed: int, dtype: str = "fp32", max_bytes: int = RANDOM_MAX_BYTES,
                  problem: str = "gemm") -> Suite:
    """n shapes, each of M, N and K drawn log-uniformly from 1 to RANDOM_MAX (so that 1-16, 16-256 and
    256-4096 are as likely as each other), keeping those whose run fits in max_bytes of GPU memory; of
    another problem, n elements drawn log-uniformly from 1 to RANDOM_MAX_N (a matrix problem: M and N
    from 1 to RANDOM_MAX, K = 1). The same seed draws the same shapes."""
    if n < 1:
        raise GemmlabError(f"--random takes a positive number of shapes, not {n}")
    rng = np.random.default_rng(seed)

    def draw(high: int, count: int) -> list[int]:
        return [int(x) for x in np.exp(rng.uniform(0, math.log(high + 1), count)).astype(int).clip(1, high)]
    if problem != "gemm":
        decl = problems.get(problem)
        shapes = [Shape(1, *draw(RANDOM_MAX_N, 1), 1) if decl.vector else Shape(*draw(RANDOM_MAX, 2), 1)
                  for _ in range(n)]
        drawn = f"n from 1..{RANDOM_MAX_N}" if decl.vector else f"M and N from 1..{RANDOM_MAX}"
        return Suite("random", f"{n} sizes of {problem} drawn log-uniformly, {drawn}", tuple(map(Entry, shapes)),
                     source=f"random, seed {seed}", problem=problem)
    entries = []
    while len(entries) < n:
        shape = Shape(*draw(RANDOM_MAX, 3))
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


def annotate_problem(row: dict, entry: Entry, problem: str) -> dict:
    """Add a problem suite's columns to a result row: its size (as the problem names it), the size's name,
    and x cupy, the reference's time over the row's, in x_cublas, the key the summary reads (as a
    problem's row holds its reference's % in pct_cublas)."""
    row.update(shape=problems.get(problem).label(entry.shape), shape_name=entry.name,
               x_cublas=row["pct_cublas"] / 100 if row.get("pct_cublas") else None)
    return row


def _who(r: dict) -> str:
    return "auto" if r.get("chosen_by") == "auto" else r["variant"]


def summary(rows: list[dict]) -> list[dict]:
    """Per variant (auto's choices as one, "auto"; not the yardstick, cuBLAS or a problem's cupy): over the
    shapes it ran, the geometric mean and the minimum of x cuBLAS (x cupy), the share of shapes at or above
    1.00x, and how many shapes failed (a failed shape has no ratio and counts as below)."""
    out = []
    for name in dict.fromkeys(_who(r) for r in rows if not metrics.is_yardstick(r)):
        mine = [r for r in rows if not metrics.is_yardstick(r) and _who(r) == name]
        ratios = [r["x_cublas"] for r in mine if r.get("x_cublas")]
        out.append({"variant": name, "shapes": len(mine), "failed": len(mine) - len(ratios),
                    "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
                    "min": min(ratios) if ratios else None,
                    "at_or_above": sum(x >= 1.0 for x in ratios) / len(mine) if mine else None})
    return out
