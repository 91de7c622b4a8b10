"""FP8: the formats and their rounding, the scales of each mode, the dequantised reference and its bound
(numpy stands in for cupy), and the FP8 rung's configurations (rendered, compiled, the QGMMA in the SASS);
on a GPU, the rung on every scaling mode, the rounding against torch's, torch._scaled_mm's row and
cuBLASLt's through nvmath-python (--refs cublaslt)."""

import math
import re
import shutil
import subprocess

import numpy as np
import pytest

from gemmlab.compile import compile_rendered
from gemmlab.gpu.problem import INPUT_SETS, Inputs, Problem
from gemmlab.render import render
from gemmlab.results import check, fp8
from gemmlab.results.model import Shape
from gemmlab.templates import discover
from conftest import sass
from sampling import FULL, risk_sample

FP8 = ["e4m3", "e5m2"]


# ---------------------------------------------------------------------------- the formats

@pytest.mark.parametrize("dtype,largest,smallest,top", [("e4m3", 448.0, 2.0 ** -9, 0x7E),
                                                        ("e5m2", 57344.0, 2.0 ** -16, 0x7B)])
def test_the_formats_values(dtype, largest, smallest, top):
    v = fp8.FORMATS[dtype].values()
    assert v[0] == 0 and v[1] == smallest and v[top] == largest and np.isnan(v[0x7F]) and np.isnan(v[0xFF])
    assert np.array_equal(v[0x80:0x80 + top + 1], -v[:top + 1])
    assert np.all(np.diff(v[:top + 1]) > 0)  # codes 0 .. top increase: what encode's binary search needs
    assert v[0x38 if dtype == "e4m3" else 0x3C] == 1.0
    if dtype == "e5m2":
        assert v[0x7C] == np.inf and v[0xFC] == -np.inf


@pytest.mark.parametrize("dtype", FP8)
def test_every_finite_code_encodes_to_itself(dtype):
    v = fp8.FORMATS[dtype].values()
    codes = np.arange(256, dtype=np.uint8)
    finite = np.isfinite(v)
    assert np.array_equal(fp8.encode(np, v[finite], dtype), codes[finite])
    assert np.array_equal(fp8.decode(np, codes[finite], dtype), v[finite])


@pytest.mark.parametrize("dtype", FP8)
def test_encode_rounds_to_nearest_even_and_saturates(dtype):
    f = fp8.FORMATS[dtype]
    v = f.values()[:f.top_code + 1].astype(np.float64)
    mid = (v[:-1] + v[1:]) / 2  # exactly between codes c and c + 1: to the even one
    got = fp8.encode(np, mid.astype(np.float32), dtype)
    c = np.arange(len(mid))
    assert np.array_equal(got, np.where(c % 2 == 0, c, c + 1))
    # just off the midpoint: to the nearer one
    nudge = np.diff(v) * 0.01
    assert np.array_equal(fp8.encode(np, (mid - nudge).astype(np.float32), dtype), c)
    assert np.array_equal(fp8.encode(np, (mid + nudge).astype(np.float32), dtype), c + 1)
    # against a brute-force nearest on random values, signs too
    x = np.random.default_rng(1).standard_normal(20000).astype(np.float32) * np.float32(f.largest / 8)
    codes = fp8.encode(np, x, dtype)
    err = np.abs(fp8.decode(np, codes, dtype).astype(np.float64) - x)
    best = np.abs(np.abs(x)[:, None].astype(np.float64) - v[None, :]).min(axis=1)
    assert np.array_equal(err, best)
    # past the largest value: the largest, not infinity or NaN; NaN stays NaN
    big = fp8.encode(np, np.array([1e30, -1e30, f.largest * 1.01, np.nan], np.float32), dtype)
    assert big.tolist() == [f.top_code, 0x80 | f.top_code, f.top_code, 0x7F]


def test_narrow_k_is_what_the_tensor_cores_sum_before_promotion():
    assert [fp8.narrow_k(p, 1040) for p in (0, 128, 256, 512)] == [1040, 128, 256, 512]
    assert [fp8.narrow_k(p, 96) for p in (0, 128, 512)] == [96, 96, 96]
    checked = [p for p in (0, 128, 256, 512) if fp8.narrow_k(p, 4096) <= fp8.CHECKED_NARROW_K]
    assert checked == [128, 256]  # the GPU tests expect a PASS of these at any K, and of the others at short K


# ---------------------------------------------------------------------------- scales and quantisation

def test_scales_per_mode_against_numpy():
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((70, 300), dtype=np.float32), rng.standard_normal((300, 200), dtype=np.float32)
    q = fp8.quantise(np, A, "A", "e4m3", "tensor")
    assert q.scales.shape == (1,) and q.scales[0] == np.float32(np.abs(A).max() / 448)
    q = fp8.quantise(np, B, "B", "e4m3", "row")
    assert np.array_equal(q.scales, (np.abs(B).max(axis=0) / np.float32(448)).astype(np.float32))
    q = fp8.quantise(np, A, "A", "e4m3", "block")  # [K/128][M]: 3 K blocks, the last 44 wide
    assert q.scales.shape == (3, 70)
    assert q.scales[2, 5] == np.float32(np.abs(A[5, 256:]).max() / 448)
    assert q.scales[0, 69] == np.float32(np.abs(A[69, :128]).max() / 448)
    q = fp8.quantise(np, B, "B", "e5m2", "block")  # [K/128][N/128]
    assert q.scales.shape == (3, 2) and q.scales[1, 1] == np.float32(np.abs(B[128:256, 128:]).max() / 57344)


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("mode", fp8.SCALE_MODES)
def test_quantised_values_are_codes_times_scales(dtype, mode):
    rng = np.random.default_rng(4)
    A = rng.standard_normal((40, 260), dtype=np.float32) * np.float32(3)
    q = fp8.quantise(np, A, "A", dtype, mode)
    groups = q.scales.T if mode == "block" else q.scales.reshape(-1, 1)  # as group_amax lays them out
    full = fp8.expand(np, groups, A.shape, "A", mode)
    assert np.array_equal(q.values, fp8.decode(np, q.codes, dtype) * full)
    # each group's largest |x| lands on (or within rounding of) the format's largest value
    assert np.abs(fp8.decode(np, q.codes, dtype)).max() == fp8.FORMATS[dtype].largest
    rel = np.abs(q.values - A) / np.abs(A).max()
    assert rel.max() < 2.0 ** -(fp8.FORMATS[dtype].man_bits + 1) * 1.01  # half a unit in the last place


def test_small_integers_stay_exact_with_power_of_two_scales():
    x = np.arange(-4, 5, dtype=np.float32).reshape(1, 9).repeat(3, axis=0)
    for dtype in FP8:
        q = fp8.quantise(np, x, "A", dtype, "row", exact=True)
        assert np.array_equal(q.values, x) and np.all(np.log2(q.scales) == np.round(np.log2(q.scales)))
    # with amax / largest as the scale, 3 x 448 / 4 = 336 is no e4m3 value: why the exact set rounds its scales
    q = fp8.quantise(np, x, "A", "e4m3", "tensor")
    assert not np.array_equal(q.values, x)


# ---------------------------------------------------------------------------- the reference and the check

@pytest.mark.parametrize("mode", fp8.SCALE_MODES)
def test_fp8_inputs_reference_is_the_dequantised_product(mode):
    p = Problem(Shape(70, 136, 300), seed=2, dtype="e4m3", xp=np)
    for inputs in p.input_sets(mode):
        assert inputs.A.dtype == np.uint8 and inputs.Bt.shape == (136, 300) and inputs.scale == mode
        assert np.array_equal(inputs.Bt, inputs.B.T)
        a = fp8.decode(np, inputs.A, "e4m3")
        b = fp8.decode(np, inputs.B, "e4m3")
        sa, sb = inputs.scale_a, inputs.scale_b
        if mode == "tensor":
            A, B = a * sa[0], b * sb[0]
        elif mode == "row":
            A, B = a * sa[:, None], b * sb[None, :]
        else:
            A = a * np.repeat(sa.T, 128, axis=1)[:, :300]
            B = b * np.repeat(np.repeat(sb, 128, axis=0), 128, axis=1)[:300, :136]
        assert np.array_equal(inputs.ref, A @ B) or np.allclose(inputs.ref, A @ B, rtol=1e-6, atol=1e-6)
        assert inputs.exact == (inputs.kind.scale is None)
    # the scales are fenced with NaN, as A and B are
    buf = inputs.scale_a.base if inputs.scale_a.base is not None else inputs.scale_a
    assert np.isnan(buf.reshape(-1)[:128]).all()


def kernel_fp8(p, scale_mode, how):
    """launch_on for Problem.verify: C from the codes and scales as a kernel would compute it: `how` is
    "right" (the codes' product in float64, scaled), or one of the mistakes a kernel can make."""
    def on(inputs):
        def launch():
            a = fp8.decode(np, inputs.A, p.dtype).astype(np.float64)
            b = fp8.decode(np, inputs.Bt, p.dtype).astype(np.float64).T
            sa, sb = inputs.scale_a.astype(np.float64), inputs.scale_b.astype(np.float64)
            M, K = a.shape
            if scale_mode == "tensor":
                c = (a @ b) * (sa[0] if how != "no scale b" else 1) * (sb[0] if how != "no scale b" else 1)
            elif scale_mode == "row":
                c = (a @ b) * sa[:, None] * (sb[None, :] if how != "no scale b" else 1)
            else:
                c = np.zeros((M, b.shape[1]))
                for kb in range(sa.shape[0]):
                    k = slice(kb * 128, (kb + 1) * 128)
                    sbk = np.repeat(sb[kb if how != "stale block" else 0], 128)[:b.shape[1]]
                    c += (a[:, k] @ b[k, :]) * sa[kb][:, None] * sbk[None, :]
            p.C[...] = c.astype(np.float32)
        return launch
    return on


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("mode", fp8.SCALE_MODES)
def test_right_scaling_passes_and_wrong_scaling_fails(dtype, mode):
    p = Problem(Shape(130, 264, 520), seed=7, dtype=dtype, xp=np)
    c = p.verify(kernel_fp8(p, mode, "right"), sets=list(p.input_sets(mode)))
    assert c.passed, c.summary()
    wrong = "stale block" if mode == "block" else "no scale b"
    c = p.verify(kernel_fp8(p, mode, wrong), sets=list(p.input_sets(mode)))
    assert not c.passed and c.bad > 0


def test_the_bound_of_fp8_is_fp32_accumulation_the_tensor_cores_and_the_scalings_roundings():
    ref, l2 = np.array([[2.0]]), np.array([[1.0]])
    K, u = 4096, 2.0 ** -24
    got = float(check.bound(np, ref, l2, K, "e4m3")[0, 0])
    want = 10 * ((math.sqrt(K) + K / 32 / math.sqrt(3)) * u + 2 * u + 2.0 ** -12) * 1.0 + 2 * (2 * u) * 2.0
    assert got == pytest.approx(want)
    # the exact set allows nothing
    assert float(check.bound(np, ref, l2, K, "e4m3", exact=True)[0, 0]) == 0


# ---------------------------------------------------------------------------- the rung, compiled

RUNG = discover().get("wgmma_ws_fp8")
# Each scaling mode with and without promotion, every tile width each allows, both formats: the
# configurations whose code differs most (the others vary the ring and the grid, which test_compile's
# sample covers), with the fewest K steps between full waits (RUN 8 took 3.4 s to compile where RUN 2 took 2.0).
RUN = min(RUNG.params["RUN"].choices)
ALL_CONFIGS = [dict(RUNG.defaults(), DTYPE=dt, SCALE=sc, PROMOTE=pr, BN=bn, OVERLAP=ov, RUN=RUN)
               for dt in FP8 for sc in fp8.SCALE_MODES for pr in (0, 128, 512) for bn in (128, 192, 256)
               for ov in ("none", "halves", "sets")
               if not RUNG.violations(dict(RUNG.defaults(), DTYPE=dt, SCALE=sc, PROMOTE=pr, BN=bn, OVERLAP=ov, RUN=RUN))]


def _pairs(p) -> set:
    """What a configuration's code depends on: the scaling mode with the promotion on or off, the tile width
    (the registers it takes) with the promotion on or off, how the promotion overlaps the products, with
    block scales (multiplied in the promotion) and without, and the format: one word of the wgmma
    instruction, the same in every mode.
    (PROMOTE's value is a constant of the same loop; the GPU run compiles every configuration.)"""
    overlap = p["OVERLAP"] if p["PROMOTE"] else "-"  # (with no promotion there is nothing to overlap)
    return {("scale, promoted", p["SCALE"], p["PROMOTE"] > 0), ("width, promoted", p["BN"], p["PROMOTE"] > 0),
            ("format", p["DTYPE"]), ("overlap, block scales", overlap, p["SCALE"] == "block")}


def _cover(configs: list[dict], start: list[dict]) -> list[dict]:
    """Configurations enough to meet every pair of _pairs at least once: those of `start` (test_compile's
    sample of the rung, compiled anyway: the run's compile cache holds them), then greedily (a compile is
    1.5-2 s of a two-core machine's CPU; GEMMLAB_TESTS_FULL=1 compiles them all, as the GPU run does)."""
    picked = [p for p in start if p["BN"] in (128, 192, 256)]
    todo = set().union(*map(_pairs, configs)) - set().union(set(), *map(_pairs, picked))
    while todo:
        best = max(configs, key=lambda p: len(_pairs(p) & todo))
        picked.append(best)
        todo -= _pairs(best)
    return picked


def _overlaps(p) -> bool:
    return p["OVERLAP"] != "none" and p["PROMOTE"] > 0


# RUN is no constant of one code path: it sets the turns a piece is made of (RUN 4: turns of 4, then 2 and
# 1 for the rest; RUN 8: 8, 4 and 1), and where the compiler put its copies of the accumulators changed with
# them (RUN 4 alone once serialized its wgmma and spilled, in the default configuration). So each RUN that
# test_compile's sample does not compile where RUN acts (an overlap, with promotion) is compiled here, in the
# default configuration.
RUN_SAMPLED = {p["RUN"] for p in risk_sample(RUNG) if _overlaps(p)}
RUN_HERE = [dict(RUNG.defaults(), RUN=r) for r in RUNG.params["RUN"].choices if r not in RUN_SAMPLED]
CONFIGS = ALL_CONFIGS + RUN_HERE if FULL else _cover(ALL_CONFIGS, risk_sample(RUNG) + RUN_HERE)


def test_every_run_is_compiled_on_the_cpu():
    """Where an overlap acts on it: the RUN values of test_compile's sample, and the others here."""
    assert RUN_SAMPLED | {p["RUN"] for p in CONFIGS if _overlaps(p)} == set(RUNG.params["RUN"].choices)


def test_the_rungs_modes_are_all_configured():
    assert set().union(*map(_pairs, CONFIGS)) == set().union(*map(_pairs, ALL_CONFIGS))
    got = {(p["SCALE"], p["PROMOTE"] > 0) for p in CONFIGS}
    assert got == {("block", True)} | {(s, on) for s in ("tensor", "row") for on in (False, True)}
    assert {p["DTYPE"] for p in CONFIGS} == set(FP8) and {p["BN"] for p in CONFIGS} == {128, 192, 256}
    assert {p["OVERLAP"] for p in CONFIGS if p["PROMOTE"]} == {"none", "halves", "sets"}
    assert not any(p["SCALE"] == "block" and p["PROMOTE"] != 128 for p in CONFIGS)  # block scales need promotion
    assert RUNG.violations(dict(RUNG.defaults(), SCALE="block", PROMOTE=0))


# The SASS of the first configuration of each format (disassembling is 0.6 s of CPU a cubin); the PTX of all
SASS_READ = [next(p for p in CONFIGS if p["DTYPE"] == d) for d in FP8]


@pytest.mark.parametrize("params", CONFIGS,
                         ids=lambda p: f"{p['DTYPE']}-{p['SCALE']}-P{p['PROMOTE']}-BN{p['BN']}-{p['OVERLAP']}-RUN{p['RUN']}")
def test_every_fp8_mode_compiles_to_fp8_wgmma_without_spills(params):
    c = compile_rendered(render(RUNG, params), "sm_90a")
    r = c.resources
    assert r.spills == 0 and r.stack == 0, r
    assert "wgmma.mma_async instructions are serialized" not in c.log, c.log
    kind = params["DTYPE"]
    n = params["BN"] // 2 if params["OVERLAP"] == "halves" and params["PROMOTE"] else params["BN"]  # halves: N/2 a wgmma
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k32\.f32\.{kind}\.{kind}\b", c.ptx)
    if params in SASS_READ or FULL:
        assert f"QGMMA.64x{n}x32.F32.{kind.upper()}.{kind.upper()}" in sass(c)


def test_fp8_rung_takes_b_transposed_and_the_scales():
    g = RUNG.geometry(RUNG.defaults(), 256, 256, 256, 132)
    assert dict(g.tma) == {"A": (128, 128), "Bt": (128, 64)}
    assert RUNG.arguments(RUNG.defaults(), g)[-4:] == ("tma.A", "tma.Bt", "scale.A", "scale.B")
    from gemmlab import GemmlabError
    with pytest.raises(GemmlabError, match="K .* must be a multiple of 16"):
        RUNG.geometry(RUNG.defaults(), 256, 256, 264, 132)


# ---------------------------------------------------------------------------- B as it is (B_LAYOUT=kn)

# B read as it is, K x N, each stage's tile transposed in shared memory by the producer warpgroup's idle
# warps (docs/fp8.md): its tile is 128 columns (TMA's boxes of 128 bytes), in every scaling mode and format.
KN = [dict(RUNG.defaults(), B_LAYOUT="kn", BN=128, DTYPE=dt) | for_scale_kn
      for dt in FP8 for for_scale_kn in ({"SCALE": "tensor"}, {"SCALE": "row"}, {"SCALE": "block", "OVERLAP": "sets"})]


def test_b_as_it_is_takes_b_not_b_transposed():
    """The default takes B^T's map; kn B's own, with the same box, and N a multiple of 16 (B's rows, for TMA)."""
    kn = RUNG.resolve({"B_LAYOUT": "kn", "BN": 128})
    g = RUNG.geometry(kn, 256, 256, 256, 132)
    assert dict(g.tma) == {"A": (128, 128), "B": (128, 64)}
    assert RUNG.arguments(kn, g)[-4:] == ("tma.A", "tma.B", "scale.A", "scale.B")
    assert g.smem == RUNG.geometry(RUNG.resolve({"BN": 128}), 256, 256, 256, 132).smem + 4 * 128 * 128  # B's own tiles
    from gemmlab import GemmlabError
    with pytest.raises(GemmlabError, match="N must be a multiple of 16"):
        RUNG.geometry(kn, 256, 264, 256, 132)
    RUNG.geometry(RUNG.defaults(), 256, 264, 256, 132)  # B^T's rows are K long: N needs only C's 8
    assert RUNG.violations(dict(RUNG.defaults(), B_LAYOUT="kn"))  # BN 192: not whole boxes of 128 columns


def test_the_default_has_no_transposer():
    src = render(RUNG, RUNG.defaults()).source
    assert "transpose_stage" not in src and "ready0" not in src and "Braw" not in src
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in src
    kn = render(RUNG, RUNG.resolve({"B_LAYOUT": "kn", "BN": 128})).source
    assert "transpose_stage(Braw" in kn and "fence.proxy.async.shared::cta" in kn and "bar_wait(ready0" in kn


# Compiled on the CPU: per-tensor e4m3 (its SASS read too) and block scales with OVERLAP=sets, whose three sets
# of accumulators fit only just in what the transposers' registers leave the consumers (they spilled with 64);
# the transposer's code is the same in every mode. GEMMLAB_TESTS_FULL=1 compiles all of KN, as the GPU run does.
KN_CPU = KN if FULL else [KN[0], next(p for p in KN if p["SCALE"] == "block")]


@pytest.mark.parametrize("params", KN_CPU, ids=lambda p: f"{p['DTYPE']}-{p['SCALE']}-{p['OVERLAP']}")
def test_b_as_it_is_compiles_to_fp8_wgmma_and_byte_permutes_without_spills(params):
    c = compile_rendered(render(RUNG, params), "sm_90a")
    assert c.resources.spills == 0 and c.resources.stack == 0, c.resources
    assert "wgmma.mma_async instructions are serialized" not in c.log, c.log
    kind, n = params["DTYPE"], 64 if params["OVERLAP"] == "halves" else 128
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k32\.f32\.{kind}\.{kind}\b", c.ptx)
    assert "prmt.b32" in c.ptx and "fence.proxy.async.shared::cta" in c.ptx
    if params is KN[0] or FULL:
        code = sass(c)
        assert f"QGMMA.64x{n}x32.F32.{kind.upper()}.{kind.upper()}" in code and "PRMT" in code


_TRANSPOSE = re.compile(r"__device__ __forceinline__ void transpose_stage\(.*?\n}\n", re.S)
_HARNESS = r"""
#include <cstdio>
#include <cstring>
#define __device__
#define __forceinline__ inline
// PTX's prmt (CUDA's __byte_perm): byte i of the result is byte (s >> 4i & 7) of y:x (x's bytes 0..3, y's 4..7).
static unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const unsigned long long v = static_cast<unsigned long long>(y) << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i)
        r |= static_cast<unsigned>(v >> 8 * (s >> 4 * i & 7) & 0xFF) << 8 * i;
    return r;
}
FUNCTION
int main()
{
    static unsigned char raw[BYTES], kmaj[BYTES];
    if (fread(raw, 1, BYTES, stdin) != BYTES)
        return 2;
    memset(kmaj, 0xEE, BYTES);  // bytes never written show up as 0xEE
    for (int tw = 0; tw < WARPS; ++tw)
        for (int lane = 0; lane < 32; ++lane)
            transpose_stage(raw, kmaj, tw, lane);
    fwrite(kmaj, 1, BYTES, stdout);
    return 0;
}
"""


def _swizzled(rows: np.ndarray) -> np.ndarray:
    """Rows of 128 bytes as TMA's 128-byte swizzle lays them in shared memory: row r's 16-byte chunk c at
    chunk c ^ (r % 8) (the tile starts on a 1024-byte boundary)."""
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        chunks = rows[r].reshape(8, 16)
        out[r].reshape(8, 16)[np.arange(8) ^ (r % 8)] = chunks
    return out


def _box(M: np.ndarray, y: int, x: int, h: int, w: int) -> np.ndarray:
    """TMA's box of h rows and w columns at (y, x): zeros outside the matrix."""
    box = np.zeros((h, w), np.uint8)
    part = M[y:y + h, x:x + w]
    box[:part.shape[0], :part.shape[1]] = part
    return box


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to run the transpose on the CPU")
@pytest.mark.parametrize("K,N", [(208, 144), (400, 4112)])
def test_the_transpose_gives_the_tile_tma_gives_of_b_transposed(tmp_path, K, N):
    """The kernel's own transpose_stage, compiled by g++ and run for every lane of every transposer warp, on
    B's tile as TMA brings it for B_LAYOUT=kn (boxes of 64 rows of K x 128 columns), must write, byte for byte,
    the tile TMA brings of B^T for the default (boxes of 64 rows of N x 128 of K), which the wgmma reads:
    at tiles inside B and at its ends (K and N not multiples of 128: zeros past them), every byte written."""
    params = RUNG.resolve({"B_LAYOUT": "kn", "BN": 128})
    src = render(RUNG, params).source
    function = _TRANSPOSE.search(src).group(0)
    warps = int(re.search(r"it \+= (\d+)", function).group(1))
    BN = params["BN"]
    cpp = tmp_path / "t.cpp"
    cpp.write_text(_HARNESS.replace("FUNCTION", function).replace("BYTES", str(BN * 128)).replace("WARPS", str(warps)))
    exe = tmp_path / "t"
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(exe), str(cpp)], check=True)
    B = np.random.default_rng(K + N).integers(1, 256, (K, N), dtype=np.uint8)  # no zeros: a zero is TMA's fill
    for kt in range((K + 127) // 128):
        for n0 in sorted({0, (N - 1) // BN * BN}):  # the first tile column and the last (partial) one
            raw = np.concatenate([_swizzled(_box(B, kt * 128 + j % 2 * 64, n0 + j // 2 * 128, 64, 128))
                                  for j in range(BN // 64)])
            got = np.frombuffer(subprocess.run([str(exe)], input=raw.tobytes(), capture_output=True, check=True).stdout,
                                np.uint8).reshape(BN, 128)
            want = np.concatenate([_swizzled(_box(np.ascontiguousarray(B.T), n0 + j * 64, kt * 128, 64, 128))
                                   for j in range(BN // 64)])
            assert np.array_equal(got, want), (kt, n0, np.argwhere(got != want)[:5])


# ---------------------------------------------------------------------------- planted bugs in FP8

from planted import Plant  # noqa: E402

_SCALES = "            apply_scales(d, sa, sb, M, N, row, col0);"
FP8_PLANTS = [  # (plant, the SCALE it is planted in)
    (Plant("planted_fp8_zero_rows", "wgmma_ws_fp8", tuple(FP8), _SCALES,
           _SCALES + "\n            if (m0 == 0 && n0 == 0 && warp == 1)  // planted: 16 rows of the first tile are zeros\n"
                     "                for (int i = 0; i < {{ NACC }}; ++i) d[i] = 0.0f;",
           "writes zeros into 16 rows of one tile"), "tensor"),
    (Plant("planted_fp8_no_scale_b", "wgmma_ws_fp8", tuple(FP8), "    const float s = sa[0] * sb[0];",
           "    const float s = sa[0];  // planted: B's scale forgotten", "ignores B's scale"), "tensor"),
    (Plant("planted_fp8_bf16_sums", "wgmma_ws_fp8", tuple(FP8), _SCALES,
           _SCALES + "\n            for (int i = 0; i < {{ NACC }}; ++i)  // planted: C rounded to bf16\n"
                     "                d[i] = __uint_as_float((__float_as_uint(d[i]) + 0x8000u) & 0xFFFF0000u);",
           "rounds C to bf16 before storing it"), "row"),
    (Plant("planted_fp8_first_block_scale", "wgmma_ws_fp8", tuple(FP8),
           "    const float* sbk = sb + static_cast<size_t>(g) * nb;",
           "    const float* sbk = sb;  // planted: B's scales of the first K block, for every block",
           "scales every K block with B's first block scales"), "block"),
]


def for_scale(scale):
    """The parameters of a scaling mode: block scales need a tile of whole 128-column blocks of B."""
    return {"SCALE": scale} | ({"BN": 128} if scale == "block" else {})


@pytest.fixture(scope="module")
def fp8_planted(tmp_path_factory):
    import gemmlab
    d = tmp_path_factory.mktemp("fp8_planted")
    for plant, _ in FP8_PLANTS:
        (d / f"{plant.name}.cu.j2").write_text(plant.source())
    return gemmlab.catalog((d,))


@pytest.mark.parametrize("plant,scale", FP8_PLANTS, ids=[p.name for p, _ in FP8_PLANTS])
def test_each_fp8_plant_applies(plant, scale, fp8_planted):
    """Each plant renders with its line in place; it is compiled where it runs (the GPU test below) and with
    GEMMLAB_TESTS_FULL=1, not on every CPU run: an FP8 compile is 2 s of a two-core machine's CPU."""
    import gemmlab
    v = fp8_planted.get(plant.name)
    params = v.resolve(for_scale(scale))
    assert "planted" in render(v, params).source
    if FULL:
        assert gemmlab.build(v, params, arch="sm_90a").resources.registers > 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("plant,scale", FP8_PLANTS, ids=[p.name for p, _ in FP8_PLANTS])
def test_each_fp8_plant_fails_untimed_and_says_where(plant, scale, dtype, fp8_planted):
    import gemmlab
    v = fp8_planted.get(plant.name)
    r = Problem(Shape(1001, 1000, 1008), dtype=dtype).run(gemmlab.build(v, v.resolve(dict(for_scale(scale), DTYPE=dtype))))
    assert r.status == "FAIL" and r.timing is None, (plant.name, r.check and r.check.summary())
    assert r.check.bad > 0 and r.check.tiles["bad"] > 0 and "out of bound" in r.check.summary()


# ---------------------------------------------------------------------------- C through TMA stores (TMA_STORE)

def _tma(params: dict, boxes: int | None = None) -> dict:
    """params with TMA_STORE on: as many staging boxes as a consumer's piece of C fills, up to 4 (which fits
    beside the default's 4 stages in FP32), or `boxes`."""
    p = dict(RUNG.defaults(), **params)
    fill = p["BN"] * (4 if p["OUT_DTYPE"] == "fp32" else 2) // 128
    return dict(p, TMA_STORE=boxes or min(4, fill))


# Every scaling mode in FP32 (e4m3); bf16 C with e5m2 (the C type changes the staging code; the format one word
# of the wgmma); FP32 in batches of 2 boxes (three batches a piece at BN 192, each waiting for the one before).
TMA = ([_tma(for_scale(mode)) for mode in fp8.SCALE_MODES]
       + [_tma({"DTYPE": "e5m2", "OUT_DTYPE": "bf16"}), _tma({}, boxes=2)])
# Compiled on every CPU run: the per-tensor one and bf16 C (an FP8 compile is 5 to 7 s of a two-core machine's
# CPU); GEMMLAB_TESTS_FULL=1 compiles all of TMA, as the GPU run does.
TMA_CPU = TMA if FULL else [TMA[0], TMA[-2]]


def test_tma_store_takes_a_map_of_c_and_fits_shared_memory():
    on = TMA[0]
    g = RUNG.geometry(on, 256, 264, 256, 132)
    assert dict(g.tma) == {"A": (128, 128), "Bt": (128, 64), "C": (32, 64)}  # boxes of 64 rows x 128 bytes
    assert RUNG.arguments(on, g)[-5:] == ("tma.A", "tma.Bt", "tma.C", "scale.A", "scale.B")
    assert dict(RUNG.geometry(_tma({"OUT_DTYPE": "bf16"}), 256, 256, 256, 132).tma)["C"] == (64, 64)
    off = RUNG.geometry(RUNG.defaults(), 256, 264, 256, 132)
    assert g.smem == off.smem - 128 // 16 * 16 * 40 * 4 + 2 * 4 * 8192  # the staging boxes replace the scratch
    assert "C" not in dict(off.tma)
    assert RUNG.violations(dict(RUNG.defaults(), TMA_STORE=6))  # 6 boxes a consumer beside 4 stages: too much
    assert RUNG.violations(dict(RUNG.defaults(), TMA_STORE=2, STAGED_STORE=False))  # one kernel, one name
    assert RUNG.violations(dict(RUNG.defaults(), TMA_STORE=4, OUT_DTYPE="bf16"))  # a bf16 piece fills 3


def test_tma_store_off_renders_none_of_it():
    """TMA_STORE=0 renders today's kernel (checked once against the commit before it, for all 7992 valid
    configurations of every parameter but STAGES and GROUP_M: only the parameter line differed)."""
    src = render(RUNG, RUNG.defaults()).source
    assert "TMA_STORE=0" in src.splitlines()[0]
    assert not any(w in src for w in ("tmC", "staging", "store_tma", "cp.async.bulk.tensor.2d.global", "bulk_group"))
    assert "store_acc_staged(d, scratch" in src


_STORE_TMA = re.compile(r"__device__ __forceinline__ void store_tma\(.*?\n}\n", re.S)
# What store_tma must do for each batch of staging boxes, in this order (the template's comment says why).
_PROTOCOL = [("wait for the last stores' reads", "cp.async.bulk.wait_group.read 0;"),
             ("the warpgroup learns it", "consumer_sync(wg - 1);"),
             ("the writes", "staging_offset(r, c);"),
             ("fence to the async proxy", "fence.proxy.async.shared::cta;"),
             ("every thread has written", "consumer_sync(wg - 1);"),
             ("the stores", "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"),
             ("their bulk group", "cp.async.bulk.commit_group;")]


def _protocol_broken(src: str) -> str | None:
    """Why the rendered kernel's TMA stores may overwrite or store a staging box too early, or None. A batch's
    body must hold the steps of _PROTOCOL once each, in order, inside the batch loop (so that each batch, and
    each tile's first, waits); the consumer must wait for the last reads before it leaves."""
    f = _STORE_TMA.search(src)
    if not f:
        return "no store_tma"
    body = f.group(0)
    loop = body.find("for (int b0 = 0;")
    if loop < 0:
        return "no loop over batches"
    at = loop
    for what, marker in _PROTOCOL:
        i = body.find(marker, at)
        if i < 0:
            return f"{what} ({marker}) missing or out of order"
        at = i + len(marker)
    if body.count("cp.async.bulk.wait_group.read") != 1 or body.count("fence.proxy.async.shared::cta") != 1:
        return "a wait or fence more than once: the order cannot be read"
    consumer_end = src[src.find("store_tma(d, staging"):]
    if "cp.async.bulk.wait_group.read 0;" not in consumer_end.split("cluster_meet();")[0]:
        return "the consumer leaves before the last stores have read shared memory"
    return None


def test_tma_store_waits_and_fences_in_order_and_the_check_would_see_otherwise():
    src = render(RUNG, TMA[0]).source
    assert _protocol_broken(src) is None, _protocol_broken(src)
    wait = '        if (issuer)  // 1. the stores that read these staging boxes last have read them\n' \
           '            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");\n'
    fence = ('        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");'
             '  // 4. the writes, visible to TMA\'s reads\n')
    end = ("        if (warp == 0 && lane == 0)  // the last stores have read the staging boxes before shared memory "
           "goes\n            asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\");\n")
    assert src.count(wait) == 1 and src.count(fence) == 1 and src.count(end) == 1
    plants = {"no wait before reusing the boxes": src.replace(wait, ""),
              "the wait after the writes": src.replace(wait, "").replace(fence, wait + fence),
              "no fence": src.replace(fence, ""),
              "no barrier before the stores": src.replace(fence + "        consumer_sync(wg - 1);", fence),
              "no wait at the end": src.replace(end, "")}
    for name, planted in plants.items():
        assert planted != src, name
        assert _protocol_broken(planted), name


_STAGING = re.compile(r"__host__ __device__ __forceinline__ int staging_offset\(.*?\n}\n", re.S)
_STAGING_HARNESS = r"""
#include <cstdio>
#define __host__
#define __device__
#define __forceinline__ inline
FUNCTION
int main()
{
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < COLS; ++c)
            printf("%d\n", staging_offset(r, c));
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to run the staging layout on the CPU")
@pytest.mark.parametrize("out", ["fp32", "bf16"])
def test_the_staging_box_is_the_layout_tma_reads_and_free_of_bank_conflicts(tmp_path, out):
    """The kernel's own staging_offset, compiled by g++: every element of a 64-row box lands where TMA's
    128-byte swizzle has it (tests' _swizzled, which the transpose test checks against the tiles TMA
    gives), each byte once; and a warp's write of one 8-column block (8 rows x 4 lanes, as store_tma does
    it) is as few shared-memory wavefronts as its bytes allow."""
    src = render(RUNG, _tma({"OUT_DTYPE": out})).source
    size = 4 if out == "fp32" else 2
    cols = 128 // size
    cpp = tmp_path / "s.cpp"
    cpp.write_text(_STAGING_HARNESS.replace("FUNCTION", _STAGING.search(src).group(0)).replace("COLS", str(cols)))
    exe = tmp_path / "s"
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(exe), str(cpp)], check=True)
    at = np.array(subprocess.run([str(exe)], capture_output=True, check=True, text=True).stdout.split(),
                  int).reshape(64, cols)
    # the box as C holds it: element (r, c)'s bytes, r * 128 + c * size ..; the staging box must be its swizzle
    ids = np.arange(64 * cols, dtype=np.int64).reshape(64, cols)
    box = np.zeros(64 * 128, np.int64) - 1
    for r in range(64):
        for c in range(cols):
            box[at[r, c]:at[r, c] + size] = ids[r, c]
    assert (box >= 0).all()
    want = _swizzled(np.repeat(ids, size, axis=1).astype(np.int64).reshape(64, 128))
    assert np.array_equal(box.reshape(64, 128), want)
    for warp in range(4):
        for j in range(cols // 8):
            for h in range(2):
                lanes = [(warp * 16 + lane // 4 + 8 * h, j * 8 + lane % 4 * 2) for lane in range(32)]
                words = {(at[r, c] + b) // 4 for r, c in lanes for b in range(0, 2 * size, 4)}
                banks = np.bincount([w % 32 for w in words], minlength=32)
                assert banks.max() == -(-len(words) // 32), (warp, j, h, banks)


@pytest.mark.parametrize("params", TMA_CPU,
                         ids=lambda p: f"{p['DTYPE']}-{p['SCALE']}-{p['OUT_DTYPE']}-T{p['TMA_STORE']}")
def test_tma_store_compiles_to_tma_stores_without_spills(params):
    """Every scaling mode, bf16 C and the batches: no spills, no serialized wgmma, the wait and the fence in
    the PTX in store_tma's order, and UTMASTG (TMA's store) in the SASS of the first."""
    c = compile_rendered(render(RUNG, params), "sm_90a")
    assert c.resources.spills == 0 and c.resources.stack == 0, c.resources
    assert "wgmma.mma_async instructions are serialized" not in c.log, c.log
    ptx = c.ptx
    i = ptx.find("cp.async.bulk.wait_group.read 0")
    assert 0 <= i < ptx.find("fence.proxy.async.shared::cta", i) < ptx.find("cp.async.bulk.tensor.2d.global", i)
    assert "cp.async.bulk.commit_group" in ptx
    if params is TMA[0] or FULL:
        assert "UTMASTG" in sass(c)


def test_the_default_sass_has_no_tma_store():
    c = compile_rendered(render(RUNG, RUNG.defaults()), "sm_90a")
    code = sass(c)
    assert "UTMASTG" not in code and "UTMALDG" in code


# ---------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FP8)
def test_encode_agrees_with_torchs_rounding(dtype):
    torch = pytest.importorskip("torch")
    import cupy
    x = cupy.random.default_rng(5).standard_normal(1 << 16, dtype=cupy.float32) * cupy.float32(100)
    kind = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[dtype]
    largest = fp8.FORMATS[dtype].largest
    x = cupy.clip(x, -largest, largest)
    theirs = torch.from_dlpack(x).to(kind).view(torch.uint8)
    assert cupy.array_equal(fp8.encode(cupy, x, dtype), cupy.from_dlpack(theirs))


FP8_SHAPES = [(1, 16, 16), (300, 264, 528), (1001, 1000, 1008), (4096, 4096, 4096)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", FP8_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", fp8.SCALE_MODES)
@pytest.mark.parametrize("dtype", FP8)
def test_the_rung_on_every_scaling_mode(dtype, mode, shape):
    import gemmlab
    params = RUNG.resolve(dict(for_scale(mode), DTYPE=dtype))
    r = Problem(Shape(*shape), dtype=dtype).run(gemmlab.build(RUNG, params), timed=False)
    assert r.status == "PASS", (r.error, r.check and r.check.summary())


# B as it is: N a multiple of 16 (B's rows for TMA); one row of tiles, an odd number of tiles with K's end
# inside a step, the transposer's ends of K and N, more tiles than SMs with stream-K's pieces, and a large one.
KN_SHAPES = [(1, 16, 16), (300, 272, 528), (1001, 1008, 1040), (2100, 4112, 3008), (4096, 4096, 4096)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", KN_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("params", KN, ids=lambda p: f"{p['DTYPE']}-{p['SCALE']}")
def test_b_as_it_is_on_every_scaling_mode(params, shape):
    import gemmlab
    r = Problem(Shape(*shape), dtype=params["DTYPE"]).run(gemmlab.build(RUNG, params), timed=False)
    assert r.status == "PASS", (r.error, r.check and r.check.summary())


@pytest.mark.gpu
def test_b_as_it_is_gives_the_same_c_as_b_transposed_bit_for_bit():
    """The transpose moves bytes: the wgmmas then read the same tile as from B^T, and C is the same, bit for bit."""
    import cupy
    import gemmlab
    from gemmlab.gpu.launch import prepare
    p = Problem(Shape(1001, 4112, 3008), dtype="e4m3", seed=12)
    i, got = p.main, {}
    for layout in ("nk", "kn"):
        k = gemmlab.build(RUNG, RUNG.resolve({"B_LAYOUT": layout, "BN": 128}))
        p.C.fill(cupy.nan)  # an element left unwritten stays NaN, and NaN equals nothing
        prepare(k, 1001, 4112, 3008, p.device, workspace=p.workspace).bind(
            i.A, i.B, p.C, Bt=i.Bt, scale_a=i.scale_a, scale_b=i.scale_b)()
        got[layout] = p.C.copy()
    assert cupy.array_equal(got["nk"], got["kn"])


# TMA_STORE on the GPU: every scaling mode, both formats, both C types; the shapes of the rung's test and one
# with edge tiles in both directions, stream-K's pieces and more tiles than SMs.
TMA_SHAPES = FP8_SHAPES + [(2100, 4104, 3008)]
TMA_GPU = [_tma(dict(for_scale(mode), DTYPE=dt, OUT_DTYPE=out)) for dt in FP8 for mode in fp8.SCALE_MODES
           for out in ("fp32", "bf16")]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", TMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("params", TMA_GPU, ids=lambda p: f"{p['DTYPE']}-{p['SCALE']}-{p['OUT_DTYPE']}")
def test_tma_store_on_every_scaling_mode(params, shape):
    import gemmlab
    p = Problem(Shape(*shape), dtype=params["DTYPE"], out_dtype=params["OUT_DTYPE"])
    r = p.run(gemmlab.build(RUNG, params), timed=False)
    assert r.status == "PASS", (r.error, r.check and r.check.summary())


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1001, 1000, 1008), (2100, 4104, 3008)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("boxes", [None, 2], ids=["whole", "batches"])
@pytest.mark.parametrize("out", ["fp32", "bf16"])
@pytest.mark.parametrize("mode", fp8.SCALE_MODES)
def test_tma_store_gives_the_same_c_bit_for_bit(mode, out, boxes, shape):
    """The same sums, stored another way: C is the same, bit for bit, and every element is written (C is
    filled with a different NaN before each kernel: an element left unwritten differs)."""
    import cupy
    import gemmlab
    from gemmlab.gpu.launch import prepare
    p = Problem(Shape(*shape), dtype="e4m3", out_dtype=out, seed=13)
    i, got = p.timed_set(mode), []
    for k, params in enumerate((RUNG.resolve(dict(for_scale(mode), OUT_DTYPE=out)),
                                _tma(dict(for_scale(mode), OUT_DTYPE=out), boxes))):
        p.C.fill(cupy.nan if out == "fp32" else 0x7FC0 + k)
        prepare(gemmlab.build(RUNG, params), *shape, p.device, workspace=p.workspace).bind(
            i.A, i.B, p.C, Bt=i.Bt, scale_a=i.scale_a, scale_b=i.scale_b)()
        got.append(p.C.copy())
    assert cupy.array_equal(got[0], got[1])


@pytest.mark.gpu
@pytest.mark.parametrize("mode", fp8.SCALE_MODES)
def test_torch_scaled_mm_row_passes_or_says_why_not(mode):
    pytest.importorskip("torch")
    from gemmlab.gpu.fp8_refs import scaled_mm
    p = Problem(Shape(512, 384, 640), dtype="e4m3")
    inputs = p.timed_set(mode)
    launch, why = scaled_mm(inputs, p.C, "e4m3")
    if launch is None:
        assert why and ("torch._scaled_mm refused" in why if mode != "block" else
                        why.startswith("no torch._scaled_mm row for block scales: the layouts tried gave a wrong C"))
        return
    c = p.verify(lambda i: scaled_mm(i, p.C, "e4m3")[0], sets=list(p.input_sets(mode)))
    assert c.passed, c.summary()


@pytest.mark.gpu
@pytest.mark.parametrize("out", ["fp32", "bf16"])
@pytest.mark.parametrize("dtype", FP8)
def test_cublaslt_nvmath_row_is_checked_and_timed_or_says_why_not(dtype, out):
    """--refs cublaslt on FP8: cuBLASLt through nvmath-python on the per-tensor codes and scales, checked
    on every input set and timed, or (e5m2 x e5m2, which cuBLASLt's FP8 lacks on Hopper) no row, with why."""
    pytest.importorskip("torch")
    pytest.importorskip("nvmath")
    from gemmlab.gpu import references
    p = Problem(Shape(512, 384, 640), dtype=dtype, out_dtype=out)
    r = references.measure(p, "cuBLASLt", min_reps=3)
    if isinstance(r, references.Skipped):
        assert dtype == "e5m2" and r.why.startswith("nvmath-python's cuBLASLt does not take this GEMM"), r.why
        return
    assert r.status == "PASS" and r.timing is not None, (r.error, r.check and r.check.summary())
    assert "FP8" in r.source and r.extra["scale"] == "tensor"


@pytest.mark.gpu
def test_without_promotion_the_check_fails_and_both_match_cublaslt():
    """PROMOTE=0 leaves all of K to the tensor cores' narrow accumulator: the check fails it, as it fails
    cuBLASLt's fast accumulation; PROMOTE=128 passes, as cuBLASLt's default does. Each equals its cuBLASLt
    counterpart bit for bit (the same products, summed in the same order and precision)."""
    torch = pytest.importorskip("torch")  # noqa: F841
    import cupy
    import gemmlab
    from gemmlab.gpu.fp8_refs import scaled_mm
    p = Problem(Shape(2048, 2048, 4096), dtype="e4m3", seed=11)
    got = {}
    for promote in (0, 128):
        r = p.run(gemmlab.build(RUNG, RUNG.resolve({"PROMOTE": promote, "BN": 256 if promote == 0 else 128})), timed=False)
        assert r.status == ("FAIL" if promote == 0 else "PASS"), r.check.summary()
        launch = gemmlab.build(RUNG, RUNG.resolve({"PROMOTE": promote, "BN": 256 if promote == 0 else 128}))
        from gemmlab.gpu.launch import prepare
        i = p.main
        prepare(launch, 2048, 2048, 4096, p.device, workspace=p.workspace).bind(
            i.A, i.B, p.C, Bt=i.Bt, scale_a=i.scale_a, scale_b=i.scale_b)()
        got[promote] = p.C.copy()
    for promote, fast in ((0, True), (128, False)):
        scaled_mm(p.main, p.C, "e4m3", fast_accum=fast)[0]()
        assert cupy.array_equal(p.C, got[promote]), promote
    assert float(cupy.abs(got[0] - p.main.ref).max()) > 4 * float(cupy.abs(got[128] - p.main.ref).max())


@pytest.mark.parametrize("dtype", FP8)
def test_auto_picks_the_fp8_rung(dtype):
    from gemmlab.results.tuning import tensor_rule
    name, params, why = tensor_rule(Shape(4096, 4096, 4096), dtype)
    assert name == "wgmma_ws_fp8" and dtype in discover().get(name).dtypes and "FP8" in why
