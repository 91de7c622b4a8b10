"""Inputs any rank can make its own block of, and the check of the gathered C.

Each element of A and B is a function of the seed and its global position (a SplitMix64 hash of the
row-major index), so a rank makes exactly its block, with nothing sent, and rank 0 makes the whole
matrices for the reference: the same numbers, however the schedule cuts them. The values are uniform in
[-1, 1), with mean zero as the element-wise bound assumes (gemmlab/results/check.py), and rounded to the
input type before anything multiplies them, so the FP32 reference multiplies the very values the
kernels get. `xp` is cupy on the GPU, numpy in the tests.
"""

from __future__ import annotations

from ..results import check as checking
from ..results.check import Check
from .schedule import Block

SALT = {"A": 0x5851F42D4C957F2D, "B": 0x14057B7EF767814F}
CHUNK = 1 << 24  # elements made at a time: the hash's temporaries stay small next to the matrix


def _splitmix(xp, x):
    """SplitMix64's finaliser, on uint64 arrays (wrapping arithmetic)."""
    u = xp.uint64
    x = x + u(0x9E3779B97F4A7C15)
    x = (x ^ (x >> u(30))) * u(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> u(27))) * u(0x94D049BB133111EB)
    return x ^ (x >> u(31))


def values(xp, seed: int, which: str, block: Block, cols: int):
    """FP32 values of rows x cols `block` of the global matrix `which` ("A" or "B", `cols` columns)."""
    u = xp.uint64
    out = xp.empty((block.rows, block.cols), dtype=xp.float32)
    key = u((seed * 0x2545F4914F6CDD1D + SALT[which]) & 0xFFFFFFFFFFFFFFFF)
    step = max(1, CHUNK // max(block.cols, 1))
    j = xp.arange(block.col0, block.col0 + block.cols, dtype=u)[None, :]
    for r in range(0, block.rows, step):
        i = xp.arange(block.row0 + r, block.row0 + min(r + step, block.rows), dtype=u)[:, None]
        h = _splitmix(xp, (i * u(cols) + j) ^ key)
        # the top 24 bits: k / 2^23 - 1 is exact in FP32, in [-1, 1)
        out[r:r + step] = (h >> u(40)).astype(xp.float32) * xp.float32(2.0 ** -23) - xp.float32(1.0)
    return out


def to_type(xp, x, dtype: str):
    """FP32 values -> the kernels' input array (bfloat16 as uint16 bits, as gemmlab/gpu/problem.py)."""
    from ..gpu.problem import to_bf16
    if dtype == "bf16":
        return to_bf16(x)
    if dtype == "fp16":
        return x.astype(xp.float16)
    return x


def from_type(xp, x, dtype: str):
    """The kernels' input array -> its exact FP32 values."""
    from ..gpu.problem import from_bf16
    if dtype == "bf16":
        return from_bf16(x)
    return x.astype(xp.float32)


def block(xp, seed: int, which: str, blk: Block, cols: int, dtype: str):
    """A rank's block of A or B, in the kernels' input type."""
    return to_type(xp, values(xp, seed, which, blk, cols), dtype)


class Reference:
    """What the whole C must be, made on one GPU from the seed: FP32 (or float64) products of the rounded
    inputs, and each element's bound (gemmlab/results/check.py)."""

    def __init__(self, xp, seed: int, M: int, N: int, K: int, dtype: str):
        A = from_type(xp, block(xp, seed, "A", Block(0, M, 0, K), K, dtype), dtype)
        B = from_type(xp, block(xp, seed, "B", Block(0, K, 0, N), N, dtype), dtype)
        self.ref = xp.matmul(A, B)
        l2 = xp.sqrt(xp.matmul(A * A, B * B))
        del A, B
        self.bound = checking.bound(xp, self.ref, l2, K, dtype)
        self.name = f"cupy.matmul fp32 of the {dtype} inputs on one GPU" if dtype != "fp32" else "cupy.matmul on one GPU"

    def check(self, xp, C, owners: list[tuple[int, Block]]) -> tuple[Check, list[int]]:
        """The verdict on the gathered C, and the ranks whose blocks hold elements out of bound."""
        verdict = checking.verdict(xp, C, self.ref, self.bound, self.name)
        bad = []
        if not verdict.passed:
            for rank, b in owners:
                rows, cols = slice(b.row0, b.row0 + b.rows), slice(b.col0, b.col0 + b.cols)
                diff = xp.abs(C[rows, cols] - self.ref[rows, cols])
                if int(((diff > self.bound[rows, cols]) | ~xp.isfinite(diff)).sum()):
                    bad.append(rank)
        return verdict, bad
