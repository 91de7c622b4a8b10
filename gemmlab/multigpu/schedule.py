"""Schedules of a distributed GEMM: files of data in kernels/dist/, and their arithmetic.

A schedule says how A, B and C are split over the P ranks and which steps, from a small vocabulary the
executor knows (gemmlab/multigpu/execute.py), turn the pieces into C:

    allgather X       X (split by rows) gathered whole onto every rank (ncclAllGather)
    gemm              C = A @ B on the blocks in hand, with the chosen kernel
    reduce_scatter C  the ranks' partial products of all of C summed, each keeping its rows
    ring A            P steps: multiply the block of A in hand while NCCL send/recv passes it on
    allgather_overlap A   the all-gather of A, cut into `chunks` all-gathers on a second stream: the
                      rank's own block is multiplied first, each chunk's rows as soon as they are there;
                      with `arrival = true` in one launch over all of C's rows, whose tiles wait for
                      their chunk's flag (engines = "copy" only: kernels/lib/arrival.j2); its
                      `transport` says how the chunks move: "allgather" (an all-gather each, the default)
                      or "pulls" (the others' pieces copied out of their windows behind one barrier a
                      repetition, ncclGetPeerDevicePointer: NCCL 2.29.2 and later)
    summa             q steps on a q x q grid: broadcast a panel of A along rows and of B along columns,
                      multiply, add

A split is "rows", "cols", "grid" (q x q blocks) or "whole". A schedule's `engines` says what moves its
data: "sm" (NCCL's kernels, on the SMs, the default) or "copy" (NCCL's copy-engine collectives: a
communicator with the zero-CTA policy, the gathered buffers in symmetric windows; no SM is taken).
`check_steps` follows the layouts through the steps, so a file whose steps cannot make its C is refused when it is read, with the reason. Everything
else here is arithmetic on shapes: each rank's blocks, its local GEMMs, the bytes it sends. No GPU.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import GemmlabError
from ..results.model import ITEM_BYTES, Shape

SPLITS = ("rows", "cols", "grid", "whole")
OPS = ("allgather", "gemm", "reduce_scatter", "ring", "summa", "allgather_overlap")
ENGINES = ("sm", "copy")
TRANSPORTS = ("allgather", "pulls")  # how an arrival step's chunks move
C_BYTES = 4  # C is FP32 for every input type


@dataclass(frozen=True)
class Step:
    op: str
    operand: str | None = None
    chunks: int = 1       # allgather_overlap: how many all-gathers each rank's block is cut into
    arrival: bool = False  # allgather_overlap: one GEMM launch whose tiles wait for their chunk's flag
    transport: str = "allgather"  # arrival: how the chunks move (TRANSPORTS)


@dataclass(frozen=True)
class Schedule:
    name: str
    pattern: str
    idea: str
    split: dict
    steps: tuple[Step, ...]
    baseline: str        # the schedule whose steps, with cuBLAS and no overlap, this one is measured against
    square: bool = False  # ranks on a q x q grid: P must be a square
    path: str = ""
    engines: str = "sm"   # "copy": NCCL's copy-engine collectives (zero CTAs, symmetric windows)

    @property
    def overlaps(self) -> bool:
        """Whether its communication can run beside its GEMMs (on a second stream)."""
        return any(s.op in ("ring", "summa", "allgather_overlap") for s in self.steps)

    @property
    def copy_engines(self) -> bool:
        return self.engines == "copy"

    @property
    def arrival(self) -> bool:
        """Whether its GEMM is one launch that waits for rows as they arrive (a template with ARRIVAL)."""
        return any(s.arrival for s in self.steps)

    @property
    def transport(self) -> str:
        """How its arrival step's chunks move (TRANSPORTS): "pulls" needs NCCL 2.29.2 and later."""
        return next((s.transport for s in self.steps if s.arrival), "allgather")


def builtin_dir() -> Path:
    from ..templates import builtin_dir as kernels
    return kernels() / "dist"


def _where(path: Path, message: str) -> GemmlabError:
    return GemmlabError(f"{path}: {message}")


def load(path: Path) -> Schedule:
    """A schedule file, its vocabulary and layouts checked."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise _where(path, f"not a schedule file: {e}") from None
    for key in ("name", "pattern", "idea", "split", "steps"):
        if key not in doc:
            raise _where(path, f"no '{key}'")
    split = {k: doc["split"].get(k) for k in "ABC"}
    for k, v in split.items():
        if v not in SPLITS:
            raise _where(path, f"split.{k} is {v!r}; a split is one of {', '.join(SPLITS)}")
    steps = []
    for s in doc["steps"]:
        if s.get("op") not in OPS:
            raise _where(path, f"unknown step {s.get('op')!r}; the executor knows {', '.join(OPS)}")
        chunks = s.get("chunks", 1)
        if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks < 1:
            raise _where(path, f"chunks is a number of all-gathers (1 or more), not {chunks!r}")
        arrival = s.get("arrival", False)
        if not isinstance(arrival, bool):
            raise _where(path, f"arrival is true or false, not {arrival!r}")
        transport = s.get("transport", "allgather")
        if transport not in TRANSPORTS:
            raise _where(path, f"transport is one of {', '.join(TRANSPORTS)}, not {transport!r}")
        steps.append(Step(s["op"], s.get("operand"), chunks, arrival, transport))
    grid = doc.get("grid", "line")
    if grid not in ("line", "square"):
        raise _where(path, f"grid is 'line' or 'square', not {grid!r}")
    engines = doc.get("engines", "sm")
    if engines not in ENGINES:
        raise _where(path, f"engines is 'sm' (NCCL's kernels) or 'copy' (NCCL's copy-engine collectives), "
                           f"not {engines!r}")
    sched = Schedule(doc["name"], doc["pattern"], doc["idea"], split, tuple(steps), doc.get("baseline", doc["name"]),
                     grid == "square", str(path), engines)
    try:
        check_steps(sched)
    except GemmlabError as e:
        raise _where(path, e.message) from None
    return sched


def check_steps(sched: Schedule) -> None:
    """Follow the layouts of A, B and C through the steps: each step must find what it needs, and the
    last must leave C as the split says."""
    a, b, c = sched.split["A"], sched.split["B"], None
    for s in sched.steps:
        if s.op == "allgather":
            if s.operand not in ("A", "B") or {"A": a, "B": b}[s.operand] != "rows":
                raise GemmlabError("allgather gathers A or B split by rows (the ranks' blocks, one after another, "
                                   "are then the whole matrix)")
            a, b = ("whole", b) if s.operand == "A" else (a, "whole")
        elif s.op == "gemm":
            c = _product(a, b)
        elif s.op == "reduce_scatter":
            if s.operand != "C" or c != "partial":
                raise GemmlabError("reduce_scatter sums partial products of all of C: a gemm over a slice of K "
                                   "(A by cols, B by rows) must come first")
            c = "rows"
        elif s.op in ("ring", "allgather_overlap"):
            if s.operand != "A" or (a, b) != ("rows", "cols"):
                raise GemmlabError(f"{s.op} brings every rank's rows of A to each: A split by rows, B by cols")
            c = "cols"
        elif s.op == "summa":
            if (a, b) != ("grid", "grid") or not sched.square:
                raise GemmlabError("summa needs A and B split as a grid, and grid = \"square\"")
            c = "grid"
    for s in sched.steps:
        if s.arrival and s.op != "allgather_overlap":
            raise GemmlabError(f"arrival belongs to allgather_overlap (one GEMM launch that waits for each chunk), "
                               f"not to {s.op}")
        if s.transport != "allgather" and not s.arrival:
            raise GemmlabError(f"transport = \"{s.transport}\" belongs to a step with arrival = true (its copies "
                               "raise the flags that one launch waits for)")
        if s.arrival and not sched.copy_engines:
            raise GemmlabError("arrival = true needs engines = \"copy\": the GEMM holds every SM while it waits for "
                               "the rows, so NCCL's kernels could never run to bring them (a deadlock)")
    if sched.copy_engines and not any(s.op in ("allgather", "allgather_overlap") for s in sched.steps):
        raise GemmlabError("engines = \"copy\" moves all-gathers only (NCCL's copy-engine collectives are the "
                           "all-gather, all-to-all, gather and scatter; not send/recv or reductions)")
    if c != sched.split["C"]:
        raise GemmlabError(f"the steps leave C {c or 'not computed'}, and split.C says {sched.split['C']}")


def _product(a: str, b: str) -> str:
    """The layout of C = A @ B on the blocks in hand."""
    rule = {("whole", "whole"): "whole", ("rows", "whole"): "rows", ("whole", "cols"): "cols",
            ("cols", "rows"): "partial"}
    if (a, b) not in rule:
        raise GemmlabError(f"gemm cannot multiply A split by {a} with B split by {b}: its K would not match, or "
                           "each rank would hold only a diagonal block of C (that is the ring's)")
    return rule[(a, b)]


def catalog(dirs: tuple = ()) -> dict[str, Schedule]:
    """Every schedule: the built-in ones, then those of `dirs` (a later one of the same name wins)."""
    found = {}
    for d in (builtin_dir(), *map(Path, dirs)):
        for path in sorted(Path(d).glob("*.toml")):
            s = load(path)
            found[s.name] = s
    return found


def get(name: str, dirs: tuple = ()) -> Schedule:
    schedules = catalog(dirs)
    if name not in schedules:
        raise GemmlabError(f"no schedule '{name}'", hint="the schedules: " + ", ".join(sorted(schedules)))
    return schedules[name]


# ---------------------------------------------------------------------------- the arithmetic

@dataclass(frozen=True)
class Block:
    """Rows row0 .. row0 + rows and columns col0 .. col0 + cols of a global matrix."""
    row0: int
    rows: int
    col0: int
    cols: int

    @property
    def size(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True)
class RankPlan:
    """What one rank holds, computes and sends under a schedule."""
    rank: int
    ranks: int
    grid: tuple[int, int]       # process rows x columns (1 x P for a line)
    A: Block                    # the block of A the rank's inputs start with
    B: Block
    C: Block                    # the block of C it ends with
    gemms: tuple[tuple[int, int, int], ...]  # its local GEMMs (m, n, k), in order
    sent: int                   # bytes it sends

    @property
    def coords(self) -> tuple[int, int]:
        return divmod(self.rank, self.grid[1])

    @property
    def flops(self) -> int:
        return sum(2 * m * n * k for m, n, k in self.gemms)


def process_grid(sched: Schedule, ranks: int) -> tuple[int, int]:
    if ranks < 1:
        raise GemmlabError(f"a run needs at least one rank, not {ranks}")
    if not sched.square:
        return 1, ranks
    q = math.isqrt(ranks)
    if q * q != ranks:
        near = sorted({q * q, (q + 1) ** 2} - {0})
        raise GemmlabError(f"{sched.name} runs on a square grid of ranks, and {ranks} is not a square",
                           hint=f"use {' or '.join(map(str, near))} GPUs")
    return q, q


def _part(sched: Schedule, what: str, total: int, parts: int, dim: str) -> int:
    if total % parts:
        raise GemmlabError(f"{sched.name} splits {dim} = {total} over {parts} parts, and it is not a multiple of {parts}",
                           hint=f"choose {dim} a multiple of {parts} ({what})")
    return total // parts


def _block(sched: Schedule, split: str, rows: int, cols: int, names: str, ranks: int, grid, rank: int) -> Block:
    """The block of a rows x cols matrix (dimensions named `names`, e.g. "MK") that `rank` holds."""
    what = f"{names[0]} x {names[1]} split by {split}"
    if split == "whole":
        return Block(0, rows, 0, cols)
    if split == "rows":
        n = _part(sched, what, rows, ranks, names[0])
        return Block(rank * n, n, 0, cols)
    if split == "cols":
        n = _part(sched, what, cols, ranks, names[1])
        return Block(0, rows, rank * n, n)
    i, j = divmod(rank, grid[1])
    r, c = _part(sched, what, rows, grid[0], names[0]), _part(sched, what, cols, grid[1], names[1])
    return Block(i * r, r, j * c, c)


def rank_plan(sched: Schedule, shape: Shape, ranks: int, rank: int, dtype: str = "bf16") -> RankPlan:
    """The blocks, local GEMMs and bytes sent of `rank` of `ranks` for the global M x N x K product."""
    grid = process_grid(sched, ranks)
    if not 0 <= rank < ranks:
        raise GemmlabError(f"rank {rank} is not one of 0..{ranks - 1}")
    M, N, K = shape.M, shape.N, shape.K
    item = ITEM_BYTES[dtype]
    A = _block(sched, sched.split["A"], M, K, "MK", ranks, grid, rank)
    B = _block(sched, sched.split["B"], K, N, "KN", ranks, grid, rank)
    C = _block(sched, sched.split["C"], M, N, "MN", ranks, grid, rank)
    a, b = A, B  # the blocks in hand, step by step
    gemms, sent = [], 0
    for s in sched.steps:
        if s.op == "allgather":
            held = a if s.operand == "A" else b
            sent += (ranks - 1) * held.size * item
            if s.operand == "A":
                a = Block(0, M, 0, K)
            else:
                b = Block(0, K, 0, N)
        elif s.op == "gemm":
            gemms.append((a.rows, b.cols, a.cols))
        elif s.op == "reduce_scatter":
            sent += (ranks - 1) * C.size * C_BYTES  # each rank sends the ranks' shares of C but its own
        elif s.op == "ring":
            gemms += [(a.rows, b.cols, K)] * ranks
            sent += (ranks - 1) * a.size * item
        elif s.op == "allgather_overlap":
            piece = _part(sched, f"each rank's {a.rows} rows of A cut into {s.chunks} chunks", a.rows, s.chunks,
                          "M / P")
            if s.arrival:  # one launch over every rank's rows
                gemms.append((a.rows * ranks, b.cols, K))
            else:
                gemms += [(a.rows, b.cols, K)] + [(piece, b.cols, K)] * (s.chunks * (ranks - 1))
            sent += (ranks - 1) * a.size * item
        elif s.op == "summa":
            q = grid[0]
            gemms += [(a.rows, b.cols, a.cols)] * q
            sent += (q - 1) * (a.size + b.size) * item  # its own A block along its row, B block along its column
    return RankPlan(rank, ranks, grid, A, B, C, tuple(gemms), sent)
