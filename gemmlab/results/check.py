"""Is C right? Element by element, against the error the arithmetic allows there.

One norm over all of C hides a wrong tile: a 32 x 32 patch of zeros in a 4096 x 4096 C moves the relative
Frobenius error by less than 1e-2. So every element gets its own bound, and one element past it fails.

The bound. Each element is an inner product c = sum_k a_k b_k of K terms, summed in FP32 (every kernel
here accumulates in FP32, whatever its input type). Rounding errors of a sum of K terms, in any order
(one after another, in a tree, split over K), behave like random variables of mean zero; Higham and
Mary's probabilistic analysis gives, with high probability, an error within lambda * sqrt(K) * u times
the magnitudes the sum went through. Our inputs are random with mean zero, so the partial sums are of
the size of ||a o b||_2 = sqrt(sum_k (a_k b_k)^2), not of sum_k |a_k b_k| (larger by about sqrt(K)).

The tensor cores are different: they add each block of k products (16 for 16-bit inputs, 8 or 4 for
tf32) into the FP32 accumulator with truncation (Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior
of NVIDIA tensor cores", 2021). A truncation error leans toward zero, the same way as the partial sum
it rounds, so the errors of the K/k steps do not cancel as rounded ones do: their sum follows the walk
of the partial sums, with a spread of u * (K/k) / sqrt(3) * ||a o b||_2. On an H100 this is what the
16-bit rungs show: at 8192^3 every one of them (wmma, mma, wgmma, ...) makes the same error, 1.4 times
the sqrt(K) bound alone. So for the tensor-core types the bound has that term too:

    bound_ij = LAMBDA * (sqrt(K) * u + STEPS(K) * u + u_in) * ||a_i o b_j||_2  +  2 * u_in * |ref_ij|

with u = 2^-24 (FP32's unit roundoff), STEPS(K) = (K / k) / sqrt(3) for fp16, bf16 (k = 16) and tf32
(k = 4), 0 for fp32 (CUDA-core FMAs round to nearest), and u_in the relative error with which the kernel
may read an input beyond what the reference was given: 0 for fp32, fp16 and bf16 (16-bit inputs are
rounded when they are made, and the reference multiplies those very values), 2^-10 for tf32 (10 mantissa
bits, rounded or truncated: the second term is the truncation's bias, the first its spread).
||a_i o b_j||_2 is sqrt((A o A) @ (B o B))_ij: one more GEMM. The bound covers the kernel's error and the
FP32 reference's together.

LAMBDA = 10, in standard deviations of those models: the largest error over 67 million elements of a
Gaussian is about 6 of them. In a simulation of the least accurate FP32 order (one term after another,
the product and the sum each rounded) the difference of two such sums reached 4.0 of sqrt(K) u ||a o b||_2
over 140,000 inner products of K = 1 .. 8192; for K <= 5 the worst case of the deterministic bound is
itself under 10. docs/checking.md has what every built-in kernel reaches on the GPU and why the bound
still fails every planted bug: at 4096^3 it is 4e-5 of a typical |c| for fp32 and 1e-4 for bf16, where
a wrong tile is off by ~100% and C rounded to bf16 by ~1e-3.

Inputs of small integers make every product and partial sum exact in FP32, in any order: there the bound
is 0 and one differing bit fails.

Nothing here needs a GPU: `xp` is cupy on the GPU and numpy in the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

U_FP32 = 2.0 ** -24
# FP8 (results/fp8.py): the reference multiplies the dequantised inputs, code x scale, each rounded once
# to FP32, and the kernel multiplies its sums by the scales (their product rounded, then the multiply):
# two roundings of each input's and of each result's size, as u_in = 2u.
U_INPUT = {"fp32": 0.0, "fp16": 0.0, "bf16": 0.0, "tf32": 2.0 ** -10, "e4m3": 2.0 ** -23, "e5m2": 2.0 ** -23}
# K per truncated addition into the accumulator: the tensor cores' block of products (None: rounded FMAs).
TRUNCATED_K = {"fp32": None, "fp16": 16, "bf16": 16, "tf32": 4, "e4m3": 32, "e5m2": 32}
# FP8's tensor cores sum their products in an accumulator narrower than FP32 (the rung wgmma_ws_fp8 and
# cuBLASLt promote its sums into FP32 registers every 128 of K). On an H100 the error of that accumulation,
# with promotion every 128, measured 1.27e-4 ||a o b||_2 (rms over C, 2^-12.9) at K = 1024, 4096 and 16384,
# the same bit for bit in cuBLASLt (torch._scaled_mm) and in wgmma_ws_fp8 PROMOTE=128; its worst elements
# reached 9 times that at K = 1024 (docs/fp8.md). The bound allows LAMBDA x 2^-12 of ||a o b||_2 for it: 20
# times the rms and twice that worst. Without promotion (cuBLASLt's "fast accumulation") the error grows
# with K and passes it by 4 to 8 times at K = 1024 and 4096.
U_TENSOR_ACC = {"e4m3": 2.0 ** -12, "e5m2": 2.0 ** -12}
LAMBDA = 10.0
ALPHA, BETA = 1.5, -0.75  # alpha_beta's scalars: neither 0 nor 1, so a kernel that ignores one fails
EPILOGUES = ("none", "alpha_beta", "bias_relu")
MAX_TILES_LISTED = 32   # bad tiles listed by position in a row; the map shows them all
MAP_CELLS = (32, 64)    # the coarse map of bad tiles: at most this many rows x columns of cells


def bound(xp, ref, l2, K: int, dtype: str, exact: bool = False):
    """The largest |C - ref| each element may have (see the module's docstring). `l2` is
    sqrt((A o A) @ (B o B)); `exact` inputs (small integers) allow no error at all."""
    if exact:
        return xp.zeros(ref.shape, dtype=ref.dtype)
    u_in, k = U_INPUT[dtype], TRUNCATED_K[dtype]
    steps = K / k / math.sqrt(3) if k else 0.0
    b = (LAMBDA * ((math.sqrt(K) + steps) * U_FP32 + u_in + U_TENSOR_ACC.get(dtype, 0.0))) * l2.astype(ref.dtype)
    if u_in:
        b += (2 * u_in) * xp.abs(ref)
    return b


# C's types (--out-dtype): the unit roundoff of rounding an FP32 sum to each, to nearest.
U_OUT = {"fp32": 0.0, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
FP16_MAX = 65504.0


def round_out(xp, x, out: str):
    """FP32 values rounded to C's type `out`, to nearest even, and back to FP32 (exactly)."""
    if out == "fp16":
        return x.astype(xp.float16).astype(xp.float32)
    if out == "bf16":
        u = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(xp.uint32).view(xp.float32)
    return x


def output(xp, ref, bnd, out: str, exact: bool = False):
    """What a C of type `out` must be, and its bound: the kernel's FP32 sum, within `bnd` of ref, is
    rounded once as it is stored, which moves it by at most u_out of its size (and fp16, with 10 bits
    below 2^-14, by half of its smallest step, 2^-25, where it is subnormal). Exact inputs (their sums
    exact in FP32) must give the reference rounded the same way, bit for bit."""
    if out == "fp32":
        return ref, bnd
    if exact:
        return round_out(xp, ref, out), bnd
    extra = U_OUT[out] * (xp.abs(ref) + bnd)
    if out == "fp16":
        extra += 2.0 ** -25
    return ref, bnd + extra


def epilogue(xp, kind: str, ref, bnd, C0=None, bias=None):
    """What C must be after a fused epilogue, and its bound: alpha*AB + beta*C0 adds the roundings of
    two products and a sum (2u of each magnitude); relu(AB + bias) the rounding of one sum, and relu
    moves no error further apart."""
    if kind == "none":
        return ref, bnd
    if kind == "alpha_beta":
        scaled, old = ALPHA * ref, BETA * C0.astype(ref.dtype)
        return scaled + old, abs(ALPHA) * bnd + (2 * U_FP32) * (xp.abs(scaled) + xp.abs(old))
    if kind == "bias_relu":
        pre = ref + bias.astype(ref.dtype)
        return xp.maximum(pre, 0), bnd + (2 * U_FP32) * xp.abs(pre)
    raise ValueError(f"unknown EPILOGUE {kind!r}: gemmlab knows {', '.join(EPILOGUES)}")


@dataclass
class Check:
    """The verdict on one output C: PASS only if every element is within its bound and no input changed."""
    rel_err: float              # ||C - ref||_F / ||ref||_F: a summary, not the verdict
    max_abs_err: float
    reference: str
    unwritten: int = 0          # elements still NaN (C is poisoned with NaN before the launch)
    bad: int = 0                # elements past their bound, unwritten ones included
    ratio: float = 0.0          # the largest |C - ref| / bound (inf where the bound is 0 and C differs)
    worst: dict | None = None   # {"i", "j", "expected", "got", "bound"} of the largest ratio
    first: dict | None = None   # the same of the first bad element in row-major order
    tiles: dict | None = None   # where the bad elements are: see tile_map
    inputs: str = "random"      # the input set this verdict is on
    clobbered: list = field(default_factory=list)  # inputs the kernel wrote into: ["A: 1 element, first at (0, 0)"]

    @property
    def passed(self) -> bool:
        return self.bad == 0 and not self.clobbered and math.isfinite(self.rel_err)

    def summary(self) -> str:
        """Why it failed, in one line: what a user reads on a FAIL row."""
        if self.clobbered:
            return "wrote into its inputs: " + "; ".join(self.clobbered)
        if self.passed:
            return "every element within its bound"
        words = [f"{self.bad} element{'s' if self.bad != 1 else ''} out of bound on the {self.inputs} inputs"]
        if self.unwritten:
            words.append(f"{self.unwritten} never written")
        if self.worst:
            w = self.worst
            words.append(f"worst at ({w['i']}, {w['j']}): expected {w['expected']:.6g}, got {w['got']:.6g}"
                         f" (bound {w['bound']:.2g})")
        if self.first and self.first != self.worst:
            f = self.first
            words.append(f"first at ({f['i']}, {f['j']}): expected {f['expected']:.6g}, got {f['got']:.6g}")
        if self.tiles:
            t = self.tiles
            words.append(f"in {t['bad']} of {t['total']} tiles of {t['tile'][0]} x {t['tile'][1]}")
        return "; ".join(words)


def _element(C, ref, bnd, flat: int, N: int) -> dict:
    i, j = divmod(int(flat), N)
    return {"i": i, "j": j, "expected": float(ref[i, j]), "got": float(C[i, j]), "bound": float(bnd[i, j])}


def tile_map(xp, mask, tile: tuple[int, int]) -> dict:
    """Bad elements counted per tile of C (tile = rows x columns a block computes): how many tiles hold
    any, the first MAX_TILES_LISTED as [tile row, tile column, count], and a map of at most MAP_CELLS
    cells (each cell the tiles it covers; its value the bad elements in them), for drawing."""
    M, N = mask.shape
    bm, bn = max(1, min(tile[0], M)), max(1, min(tile[1], N))
    tm, tn = -(-M // bm), -(-N // bn)
    padded = xp.zeros((tm * bm, tn * bn), dtype=xp.int32)
    padded[:M, :N] = mask
    counts = padded.reshape(tm, bm, tn, bn).sum(axis=(1, 3))
    rows, cols = (int(x) for x in (min(tm, MAP_CELLS[0]), min(tn, MAP_CELLS[1])))
    cm, cn = -(-tm // rows), -(-tn // cols)  # tiles per map cell
    cells = xp.zeros((rows * cm, cols * cn), dtype=xp.int64)
    cells[:tm, :tn] = counts
    cells = cells.reshape(rows, cm, cols, cn).sum(axis=(1, 3))
    where = xp.argwhere(counts > 0)
    listed = [[int(a), int(b), int(counts[a, b])] for a, b in where[:MAX_TILES_LISTED].tolist()]
    return {"tile": [bm, bn], "grid": [tm, tn], "bad": int(where.shape[0]), "total": tm * tn,
            "listed": listed, "cell": [cm, cn], "map": cells.tolist()}


def verdict(xp, C, ref, bnd, reference: str, tile: tuple[int, int] | None = None,
            inputs: str = "random") -> Check:
    """Compare C with ref element by element against bnd (all M x N arrays of module xp)."""
    M, N = C.shape
    unwritten = int(xp.isnan(C).sum())
    diff = xp.abs(C.astype(ref.dtype) - ref)
    # Out of bound: past it, or not a number where the reference is one (NaN > x is False: say it).
    bad_mask = (diff > bnd) | ~xp.isfinite(diff)
    bad = int(bad_mask.sum())
    finite = xp.where(xp.isfinite(diff), diff, xp.inf)
    with_room = xp.where(bnd > 0, finite / xp.where(bnd > 0, bnd, 1), xp.where(finite > 0, xp.inf, 0))
    worst_at = int(xp.argmax(with_room))
    ratio = float(with_room.reshape(-1)[worst_at])
    norm = float(xp.linalg.norm(ref))
    err = float(xp.linalg.norm(xp.where(xp.isnan(diff), xp.inf, diff)))
    check = Check(rel_err=err / (norm or 1.0), max_abs_err=float(finite.max()) if diff.size else 0.0,
                  reference=reference, unwritten=unwritten, bad=bad, ratio=ratio, inputs=inputs)
    if bad:
        check.worst = _element(C, ref, bnd, worst_at, N)
        check.first = _element(C, ref, bnd, int(xp.argmax(bad_mask)), N)
        check.tiles = tile_map(xp, bad_mask, tile or (32, 32))
    return check


def _bits(xp, x):
    """The raw bits of an array: a NaN written into an input differs from the pristine value too."""
    return x.view({8: xp.uint64, 4: xp.uint32, 2: xp.uint16, 1: xp.uint8}[x.itemsize])


def changed(xp, name: str, now, pristine) -> str | None:
    """'A: 3 elements changed, first at (0, 7)' if `now` differs from `pristine` in any bit, else None."""
    differ = (_bits(xp, now) != _bits(xp, pristine)).reshape(-1)
    n = int(differ.sum())
    if n == 0:
        return None
    at = int(xp.argmax(differ))
    where = f"({at // now.shape[1]}, {at % now.shape[1]})" if now.ndim == 2 else f"({at})"
    return f"{name}: {n} element{'s' if n > 1 else ''} changed, first at {where}"
