"""FP8 inputs: the two formats, rounding into them, and the scales that bring a matrix into their range.

An FP8 GEMM multiplies bytes: A's and B's values divided by a scale and rounded to FP8 (`quantise`), and
the product of the bytes multiplied by the scales again on its way to C. How many scales there are is the
scaling mode (`SCALE_MODES`):

- `tensor`: one scale for A and one for B, as cuBLASLt and torch._scaled_mm take them;
- `row`: one scale per row of A and per column of B (each C element is then s_a[i] * s_b[j] * sum_k);
- `block`: one per 1 x 128 block of A (a row, 128 of K) and per 128 x 128 block of B, as DeepSeek's
  DeepGEMM takes them. The scale changes along K every 128, so a kernel scales each K block's partial
  sum before adding it into its FP32 accumulators.

A scale is amax / the format's largest value (`scale_of`): the largest |x| of its group becomes the
format's largest value, and every other value of the group keeps FP8's relative precision. Where inputs
must be exact (small integers, docs/checking.md) the scale is rounded down to a power of two: then every
integer in [-4, 4] times it is an FP8 value, and every product and sum of the dequantised values is
exact in FP32 as before.

What the check multiplies is the *dequantised* values, byte times scale in FP32 (`Quantised.A`,
`Quantised.B`), with FP32 accumulation: the kernel is judged on the arithmetic it did with the values it
was given, not on FP8's rounding of the originals.

The formats (OCP's FP8 and NVIDIA's __nv_fp8_e4m3 / __nv_fp8_e5m2):

- e4m3: 4 exponent bits (bias 7), 3 mantissa bits, no infinities; S.1111.111 is NaN; largest 448.
- e5m2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: S.11111.00 is infinity, larger codes NaN;
  largest 57344.

Both have subnormals. Rounding is to nearest, ties to the even code, and saturating (|x| past the largest
value becomes the largest, as cvt.rn.satfinite does): the scales keep |x| within range, and a value that
overshoots by rounding must not become NaN or infinity. Nothing here needs a GPU: `xp` is cupy or numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCALE_MODES = ("tensor", "row", "block")
BLOCK = 128  # the K (and B's N) extent of one block scale
# The most of K the tensor cores' narrow accumulator may sum before FP32 takes over for the check's bound
# (check.U_TENSOR_ACC, measured with promotion every 128) to hold. On an H100 PROMOTE=256 came to 0.58-0.67
# of the bound at 4096^3 and 8192^3 and passed at K = 1040; PROMOTE=512 (rel. error 3.4e-4) and none (0,
# 5.5e-4) failed it at K = 1040, as no promotion fails it at larger K (docs/fp8.md). Past this the check's
# FAIL is the point: it shows what summing longer in the tensor cores does to C.
CHECKED_NARROW_K = 256


def narrow_k(promote: int, K: int) -> int:
    """The most of K the tensor cores sum in their own accumulator: PROMOTE of it, or all of it without
    promotion (PROMOTE=0), never more than K."""
    return min(promote or K, K)


@dataclass(frozen=True)
class Format:
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    largest: float
    top_code: int  # the largest positive finite code (0x7E for e4m3, 0x7B for e5m2)

    def values(self) -> np.ndarray:
        """The 256 codes' values, float32 (NaN for the NaN codes, +-inf for e5m2's infinities)."""
        codes = np.arange(256)
        sign = np.where(codes & 0x80, -1.0, 1.0)
        e = (codes >> self.man_bits) & ((1 << self.exp_bits) - 1)
        m = codes & ((1 << self.man_bits) - 1)
        frac = m / (1 << self.man_bits)
        mag = np.where(e == 0, frac * 2.0 ** (1 - self.bias), (1 + frac) * 2.0 ** (e - self.bias))
        mag = np.where((codes & 0x7F) > self.top_code, np.nan, mag)
        if self.name == "e5m2":  # S.11111.00: infinity
            mag = np.where((codes & 0x7F) == 0x7C, np.inf, mag)
        return (sign * mag).astype(np.float32)


FORMATS = {"e4m3": Format("e4m3", 4, 3, 7, 448.0, 0x7E), "e5m2": Format("e5m2", 5, 2, 15, 57344.0, 0x7B)}


def fmt(dtype: str) -> Format:
    return FORMATS[dtype]


def decode(xp, codes, dtype: str):
    """FP8 codes (uint8) -> their float32 values, exactly."""
    return xp.asarray(fmt(dtype).values())[codes.astype(xp.int32)]


def encode(xp, x, dtype: str):
    """float32 -> FP8 codes (uint8): the nearest value, ties to the even code, saturating at the largest
    value; NaN -> a NaN code. The positive finite values increase with their code, so the nearest one is
    found by a binary search among them."""
    f = fmt(dtype)
    pos = xp.asarray(f.values()[:f.top_code + 1])  # codes 0 .. top_code, increasing
    x = xp.asarray(x, dtype=xp.float32)
    mag = xp.minimum(xp.abs(x), xp.float32(f.largest))
    hi = xp.clip(xp.searchsorted(pos, mag), 0, f.top_code)  # the first value >= mag
    lo = xp.maximum(hi - 1, 0)
    d_lo, d_hi = mag - pos[lo], pos[hi] - mag
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = xp.where(take_hi, hi, lo).astype(xp.uint8)
    code = code | xp.where(xp.signbit(x), xp.uint8(0x80), xp.uint8(0)).astype(xp.uint8)
    return xp.where(xp.isnan(x), xp.uint8(0x7F), code).astype(xp.uint8)


def scale_of(xp, amax, dtype: str, power_of_two: bool = False):
    """The scale that maps `amax` onto the format's largest value (1 where amax is 0). With power_of_two,
    the smallest power of two at or above it: amax / s still fits, and x / s is exact in FP32."""
    amax = xp.asarray(amax, dtype=xp.float32)
    s = xp.where(amax > 0, amax / xp.float32(fmt(dtype).largest), xp.float32(1.0)).astype(xp.float32)
    if power_of_two:
        s = (xp.float32(2.0) ** xp.ceil(xp.log2(s))).astype(xp.float32)
    return s


def group_amax(xp, X, operand: str, mode: str):
    """The largest |x| of each scale's group of X (A: M x K, B: K x N), in the shape `expand` takes."""
    a = xp.abs(X)
    if mode == "tensor":
        return a.max().reshape(1, 1)
    if mode == "row":
        return a.max(axis=1, keepdims=True) if operand == "A" else a.max(axis=0, keepdims=True)
    rows, cols = X.shape
    if operand == "A":  # 1 x 128: rows x K blocks
        kb = -(-cols // BLOCK)
        pad = xp.zeros((rows, kb * BLOCK), dtype=a.dtype)
        pad[:, :cols] = a
        return pad.reshape(rows, kb, BLOCK).max(axis=2)
    kb, nb = -(-rows // BLOCK), -(-cols // BLOCK)  # B: 128 x 128
    pad = xp.zeros((kb * BLOCK, nb * BLOCK), dtype=a.dtype)
    pad[:rows, :cols] = a
    return pad.reshape(kb, BLOCK, nb, BLOCK).max(axis=(1, 3))


def expand(xp, s, shape, operand: str, mode: str):
    """A group's scale at every element of a matrix of `shape`."""
    rows, cols = shape
    if mode in ("tensor", "row"):
        return xp.broadcast_to(s, shape)
    if operand == "A":
        return xp.repeat(s, BLOCK, axis=1)[:, :cols]
    return xp.repeat(xp.repeat(s, BLOCK, axis=0), BLOCK, axis=1)[:rows, :cols]


def kernel_layout(xp, s, operand: str, mode: str):
    """The scales as a kernel reads them, float32 and contiguous: tensor, one each; row, A's M and B's N;
    block, A's as [K/128][M] (the scales of one K block for consecutive rows lie together) and B's as
    [K/128][N/128]."""
    if mode == "block" and operand == "A":
        s = s.T
    return xp.ascontiguousarray(s.reshape(s.shape if mode == "block" else -1), dtype=xp.float32)


@dataclass
class Quantised:
    """One operand in FP8: its codes, its scales (as the kernel reads them) and its dequantised values."""
    codes: object   # uint8, the operand's shape
    scales: object  # float32, kernel_layout
    values: object  # float32: decode(codes) * scale, what the reference multiplies


def quantise(xp, X, operand: str, dtype: str, mode: str, exact: bool = False) -> Quantised:
    """X (float32; A is M x K, B is K x N) in FP8 with the scales of `mode`. `exact`: power-of-two
    scales, so that small integers stay exact (see the module's docstring)."""
    if mode not in SCALE_MODES:
        raise ValueError(f"unknown scaling mode {mode!r}: gemmlab knows {', '.join(SCALE_MODES)}")
    s = scale_of(xp, group_amax(xp, X, operand, mode), dtype, power_of_two=exact)
    full = expand(xp, s, X.shape, operand, mode)
    codes = encode(xp, X / full, dtype)
    values = (decode(xp, codes, dtype) * full).astype(xp.float32)
    return Quantised(codes, kernel_layout(xp, s, operand, mode), values)
