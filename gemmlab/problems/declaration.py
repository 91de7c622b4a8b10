"""What a problem declares (Declaration), and the pieces the declarations share: the input sets, the
shape of a vector problem, and the bound on a float sum.

The bound on a sum. A float32 sum of k terms, in any order (one after another, a tree, a warp's
shuffles, blocks added by atomics), makes rounding errors that behave like random variables of mean
zero (Higham and Mary's probabilistic analysis, as for GEMM's inner products: gemmlab/results/check.py).
For inputs of mean zero the partial sums are of the size of ||x||_2, so with high probability

    |y - sum| <= LAMBDA * sqrt(k) * u * ||x||_2  +  u * |sum|

with u = 2^-24 and LAMBDA = 10 standard deviations (the second term: the final rounding of y itself).
The reference is the sum in float64, whose own error is far below this. Inputs of small integers
whose every partial sum stays below 2^24 make the sum exact in any order: there the bound is 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..results.model import Shape

U_FP32 = 2.0 ** -24
LAMBDA = 10.0


@dataclass(frozen=True)
class InputSet:
    """A kind of inputs every kernel is checked on; `kind` says how the declaration makes it."""
    name: str
    kind: str
    seed_offset: int = 0


# Most problems: normal floats (timed), the same at 1000x, small integers (exact sums).
FLOAT_SETS = (InputSet("random", "normal", 0), InputSet("random x1000", "normal1000", 7919),
              InputSet("small integers", "integers", 104729))

# The sizes `gemmlab suite --problem` runs: from about a thousand elements to 2^28, most of them odd (no
# multiple of a tile or a vector), among them the sizes docs/problems.md holds out (2^24 + 12345, 2^27 - 777).
VECTOR_SIZES = (1001, 65537, 1000003, (1 << 24) + 12345, (1 << 27) - 777, 1 << 28)
MATRIX_SIZES = ((37, 129), (1000, 3001), (4097, 4095), (8191, 8193), (16384, 16384))  # M x N, up to 2^28


@dataclass(frozen=True)
class Declaration:
    """One problem, declared once.

    args: the kernel arguments a template may list in launch.args, with what each is: the inputs (by
    the names `make` gives them), the output `y`, sizes (int32) and `workspace` (launch.workspace bytes).
    make(xp, shape, rng, kind) -> {name: array}: one set of inputs.
    output(xp, shape) -> the output array (what `y` is), poisoned before each checked launch.
    expect(xp, inputs, shape, kind) -> (ref, bound): what y must be and each element's bound (float64;
    a bound of 0 is exact).
    reference(xp, inputs, y) -> a function that computes y with cupy: the yardstick, timed beside.
    sizes(shape) -> {name: int}: the size arguments.
    moved(shape): bytes every algorithm moves at least (read once, written once): the roofline's.
    ops(shape): the arithmetic operations (additions, increments), for what they are worth.
    best: the rung `gemmlab suite` runs unless told which: the fastest on the H100 (docs/problems.md).
    suite_sizes: the sizes of its suite, n (M x N pairs for a matrix problem)."""
    name: str
    what: str
    reference_name: str
    args: dict[str, str]
    make: Callable
    output: Callable
    expect: Callable
    reference: Callable
    sizes: Callable[[Shape], dict]
    moved: Callable[[Shape], int]
    ops: Callable[[Shape], int]
    best: str
    vector: bool = True          # a vector of n elements (shape 1 x n x 1); else M x N
    default_size: int = 1 << 24  # n, or the side of a square
    input_sets: tuple[InputSet, ...] = FLOAT_SETS
    poison: float = math.nan     # what y holds before a checked launch (NaN: an element never written fails)
    tile: tuple[int, int] = (1, 1024)  # the rows x columns a failing check's map counts by
    check_name: str | None = None  # what a verdict names as its reference, where not reference_name
    suite_sizes: tuple = VECTOR_SIZES
    notes: dict = field(default_factory=dict)

    def shape(self, size: int | None = None, M: int | None = None, N: int | None = None) -> Shape:
        """The shape of a run: n elements (N or size) for a vector problem; M x N for a matrix one."""
        size = size or self.default_size
        if self.vector:
            if M not in (None, 1):
                raise_shape(self, "M")
            return Shape(1, N or size, 1)
        return Shape(M or size, N or size, 1)

    def describe(self, shape: Shape) -> str:
        return f"n = {shape.N:,}" if self.vector else f"{shape.M} x {shape.N}"

    def label(self, shape: Shape) -> str:
        """The shape as a suite names it (its table, --only): n, or MxN."""
        return str(shape.N) if self.vector else f"{shape.M}x{shape.N}"

    def suite_shapes(self) -> list[Shape]:
        return [self.shape(N=s) if self.vector else self.shape(M=s[0], N=s[1]) for s in self.suite_sizes]

    def input_set(self, name: str | None) -> InputSet:
        if name is None:
            return self.input_sets[0]
        for s in self.input_sets:
            if s.name == name:
                return s
        from ..errors import GemmlabError
        raise GemmlabError(f"{self.name} has no input set '{name}'; its sets: "
                           + ", ".join(s.name for s in self.input_sets))


def raise_shape(decl: Declaration, what: str):
    from ..errors import GemmlabError
    raise GemmlabError(f"{decl.name} runs on a vector of n elements: give --size n (or -N n), not -{what}")


def floats(xp, rng, n: int, kind: str):
    """n float32 values of an input set: normal, normal times 1000, or integers in [-4, 4]."""
    if kind == "integers":
        return rng.integers(-4, 5, n).astype(xp.float32)
    x = rng.standard_normal(n, dtype=xp.float32)
    return x * xp.float32(1000.0) if kind == "normal1000" else x


def exact_sum(kind: str, terms: int) -> bool:
    """A sum of `terms` integers in [-4, 4] is exact in float32 in any order (every partial sum < 2^24)."""
    return kind == "integers" and 4 * terms < 2 ** 24


def sum_bound(terms, l2, ref):
    """The bound on a float32 sum of `terms` terms whose squares sum to l2**2 (any of them arrays)."""
    return LAMBDA * U_FP32 * (terms ** 0.5) * l2 + U_FP32 * abs(ref)
