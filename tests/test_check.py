"""The element-wise check on a CPU: numpy stands in for cupy, and "kernels" are numpy functions that
write C the way a right kernel does, or the way a wrong edit would (one tile, the K tail, a race, ...).

Every right one must PASS on every input set and every planted bug must FAIL, saying where."""

import math

import numpy as np
import pytest

from gemmlab.results import check
from gemmlab.results.check import ALPHA, BETA
from gemmlab.gpu.problem import INPUT_SETS, Problem, c_tile, from_bf16, to_bf16
from gemmlab.results.model import Shape


def problem(M, N, K, dtype="fp32", seed=5):
    return Problem(Shape(M, N, K), seed=seed, dtype=dtype, xp=np)


def f32(x, dtype):
    """An input as the FP32 values the kernel computes with."""
    if dtype == "bf16":
        return from_bf16(x)
    return x.astype(np.float32)


def tf32(x):
    """Truncate to TF32 (10 mantissa bits), as tensor cores reading raw FP32 do."""
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def kernel(p, body):
    """launch_on for Problem.verify: `body(A, B, C)` with A and B as FP32 arrays, writing C in place."""
    def on(inputs):
        return lambda: body(f32(inputs.A, p.dtype), f32(inputs.B, p.dtype), p.C)
    return on


def gemm(A, B, C):
    C[...] = A @ B  # numpy's float32 GEMM: blocked FP32 sums, another order than the reference's


def gemm_f64(A, B, C):
    C[...] = (A.astype(np.float64) @ B).astype(np.float32)  # the exact product, rounded once


def split_k(A, B, C, parts=4):
    """Four partial products summed in another order, as split-K kernels do."""
    k = np.array_split(np.arange(A.shape[1]), parts)
    C[...] = sum((A[:, i] @ B[i, :] for i in reversed(k)), np.zeros_like(C))


def one_by_one(A, B, C):
    """The least accurate order: one product after another, each product and sum rounded to FP32."""
    acc = np.zeros(C.shape, np.float32)
    for k in range(A.shape[1]):
        acc = (acc + np.outer(A[:, k], B[k, :]).astype(np.float32)).astype(np.float32)
    C[...] = acc


def truncated_blocks(A, B, C, k=16):
    """The tensor cores' order: each block of k products summed exactly, then added into the FP32
    accumulator with truncation toward zero (gemmlab/results/check.py's docstring)."""
    acc = np.zeros(C.shape, np.float32)
    for k0 in range(0, A.shape[1], k):
        exact = acc.astype(np.float64) + A[:, k0:k0 + k].astype(np.float64) @ B[k0:k0 + k, :]
        near = exact.astype(np.float32)
        acc = np.where(np.abs(near) > np.abs(exact), np.nextafter(near, np.float32(0)), near)
    C[...] = acc


SHAPES = [(1, 1, 1), (17, 33, 65), (100, 70, 50), (129, 64, 300), (64, 96, 2048)]


# Every right order on every shape and type, less two combinations that are not the project's: FP32 rungs
# use rounded FMAs, not the tensor cores' truncated blocks; and one_by_one at K = 2048 (slow in numpy,
# and K = 2048 is covered by the other orders).
RIGHT = [(shape, dtype, body) for shape in SHAPES for dtype in ("fp32", "fp16", "bf16")
         for body in (gemm, gemm_f64, split_k, one_by_one, truncated_blocks)
         if not (body is truncated_blocks and dtype == "fp32") and not (body is one_by_one and shape[2] > 300)]


@pytest.mark.parametrize("shape,dtype,body", RIGHT, ids=[f"{s}-{d}-{b.__name__}" for s, d, b in RIGHT])
def test_right_kernels_pass_on_every_input_set(shape, dtype, body):
    p = problem(*shape, dtype=dtype)
    seen = []

    def on(inputs):
        seen.append(inputs.kind.name)
        return kernel(p, body)(inputs)
    c = p.verify(on, (32, 32))
    assert c.passed, c.summary()
    assert seen == [s.name for s in INPUT_SETS]
    assert c.ratio < 1 and c.bad == 0 and c.unwritten == 0 and c.worst is None and c.tiles is None


def test_truncated_accumulation_needs_its_own_term():
    """At K = 8192 the tensor cores' truncated additions pass the 16-bit bound; the sqrt(K) term alone,
    FP32's bound, would not hold them."""
    p = problem(128, 128, 8192, dtype="bf16")
    c = p.verify(kernel(p, truncated_blocks), sets=[p.main])
    assert c.passed and c.ratio > 0.1, c.summary()  # 0.24 with this seed
    q = problem(128, 128, 8192, dtype="fp32")
    c = q.verify(kernel(q, truncated_blocks), sets=[q.main])
    assert not c.passed


def test_tf32_truncated_inputs_pass_within_the_input_term():
    p = problem(64, 96, 2048, dtype="tf32")
    c = p.verify(kernel(p, lambda A, B, C: gemm(tf32(A), tf32(B), C)))
    assert c.passed, c.summary()
    # the same kernel judged as fp32 (no input term) is far past its bound: the term is what lets it pass
    q = problem(64, 96, 2048, dtype="fp32")
    assert not q.verify(kernel(q, lambda A, B, C: gemm(tf32(A), tf32(B), C))).passed


def test_integer_inputs_must_be_exact():
    p = problem(40, 50, 300)

    def off_by_a_quarter_on_integers(A, B, C):
        gemm(A, B, C)
        if float(np.abs(A - np.round(A)).max()) == 0:  # only on the small-integer set
            C[7, 9] += 0.25
    c = p.verify(kernel(p, off_by_a_quarter_on_integers))
    assert not c.passed and c.inputs == "small integers" and c.bad == 1
    assert (c.first["i"], c.first["j"]) == (7, 9) and c.first["bound"] == 0.0
    assert c.ratio == math.inf


def test_a_kernel_right_only_on_random_inputs_fails_on_the_large_set():
    p = problem(40, 50, 300)

    def saturating(A, B, C):  # clamps as a half-precision store would: invisible on N(0, 1) inputs
        gemm(A, B, C)
        np.clip(C, -60000, 60000, out=C)
    c = p.verify(kernel(p, saturating))
    assert not c.passed and c.inputs == "random x1000"


# ---------------------------------------------------------------------------- planted bugs

def zero_tile(A, B, C):
    gemm(A, B, C)
    C[64:96, 32:64] = 0  # one 32 x 32 tile (row 2, column 1) left at zero


def last_tile_row_short_k(A, B, C):
    """At an odd M the last, partial row of tiles takes a wrong path: K - 1 products."""
    gemm(A, B, C)
    C[96:, :] = A[96:, :-1] @ B[:-1, :]


def k_tail(A, B, C):
    """The loop runs K // 32 whole steps and drops the tail of K."""
    k = A.shape[1] // 32 * 32
    C[...] = A[:, :k] @ B[:k, :]


def race_in_one_warp(A, B, C):
    """One warp (32 threads along a row of one tile) read shared memory before the last step landed."""
    gemm(A, B, C)
    C[37, 64:96] = A[37, :-32] @ B[:-32, 64:96]


def bf16_output(A, B, C):
    gemm(A, B, C)
    C[...] = from_bf16(to_bf16(C))


def cells_off_by_1e3(A, B, C):
    gemm(A, B, C)
    C[::17, ::13][:4, :4] *= 1.001  # 16 cells 0.1% wrong


def unwritten_column(A, B, C):
    C[:, :-1] = (A @ B)[:, :-1]  # the last column is never written: it stays NaN


PLANTED = [zero_tile, last_tile_row_short_k, k_tail, race_in_one_warp, bf16_output, cells_off_by_1e3,
           unwritten_column]


# Every planted bug in every type, less errors of 1e-3 in tf32: TF32 reads its inputs with errors of that
# size itself, so only the FP32 and 16-bit rungs must catch them.
BUGGY = [(bug, dtype) for bug in PLANTED for dtype in ("fp32", "tf32", "fp16", "bf16")
         if not (dtype == "tf32" and bug in (bf16_output, cells_off_by_1e3))]


@pytest.mark.parametrize("bug,dtype", BUGGY, ids=[f"{b.__name__}-{d}" for b, d in BUGGY])
def test_planted_bugs_fail_and_say_where(bug, dtype):
    M, N, K = 101, 128, 1000
    p = problem(M, N, K, dtype=dtype)
    c = p.verify(kernel(p, bug), tile=(32, 32))
    assert not c.passed and c.inputs == "random"  # caught on the first set, which timing would have used
    assert c.bad > 0 and c.worst is not None and c.first is not None
    w = c.worst
    assert not abs(w["got"] - w["expected"]) <= w["bound"]  # the worst element is out of its bound
    t = c.tiles
    assert t["tile"] == [32, 32] and t["grid"] == [4, 4] and 0 < t["bad"] <= t["total"] == 16
    assert sum(n for _, _, n in t["listed"]) == c.bad == sum(map(sum, t["map"]))
    text = c.summary()
    assert f"{c.bad} elements out of bound on the random inputs" in text and "tiles of 32 x 32" in text
    assert f"({c.first['i']}, {c.first['j']})" in text


@pytest.mark.parametrize("bug,tiles,first", [
    (zero_tile, [[2, 1, 1024]], (64, 32)),
    (race_in_one_warp, [[1, 2, 32]], (37, 64)),
    (unwritten_column, [[0, 3, 32], [1, 3, 32], [2, 3, 32], [3, 3, 5]], (0, 127)),
])
def test_the_place_of_the_error_is_exact(bug, tiles, first):
    p = problem(101, 128, 1000)
    c = p.verify(kernel(p, bug), tile=(32, 32))
    assert [t[:2] for t in c.tiles["listed"]] == [t[:2] for t in tiles] and (c.first["i"], c.first["j"]) == first
    # every wrong element, less any whose right value happens to lie within its bound of the wrong one
    assert all(n - 2 <= got <= n for (_, _, got), (_, _, n) in zip(c.tiles["listed"], tiles))
    assert c.unwritten == (101 if bug is unwritten_column else 0)


def test_last_tile_row_at_odd_m_is_the_last_row_of_tiles():
    p = problem(101, 128, 1000)
    c = p.verify(kernel(p, last_tile_row_short_k), tile=(32, 32))
    assert {ti for ti, _, _ in c.tiles["listed"]} == {3} and c.first["i"] >= 96


def test_an_error_just_past_the_bound_fails_and_just_inside_passes():
    """The verdict is the bound itself, not a looser tolerance near it."""
    for factor, passes in ((0.9, True), (1.1, False)):
        p = problem(64, 64, 512)

        def nudge(A, B, C):
            gemm_f64(A, B, C)
            C[5, 6] = p.main.ref[5, 6] + factor * p.main.bound[5, 6]
        c = p.verify(kernel(p, nudge), sets=[p.main])
        assert c.passed == passes, (factor, c.summary())


def test_the_bound_is_tight_enough_to_see_fp32_rounding_of_a_bf16_result():
    """For 16-bit inputs the bound is FP32 accumulation's: 1e-3 relative errors are far outside it."""
    p = problem(256, 256, 4096, dtype="bf16")
    typical = float(np.median(p.main.bound / np.abs(p.main.ref)))
    assert typical < 2e-4  # 10 * 2^-24 * (sqrt(4096) + 4096 / 16 / sqrt(3)) = 1.3e-4 of a typical |c|


# ---------------------------------------------------------------------------- guarded inputs


def test_a_kernel_that_writes_into_its_input_fails_and_the_input_is_restored():
    p = problem(50, 40, 30)
    pristine = p.main.A.copy()

    def stomping(inputs):
        def launch():
            gemm(f32(inputs.A, p.dtype), f32(inputs.B, p.dtype), p.C)
            inputs.A[3, 4] = 0.0
        return launch
    c = p.verify(stomping)
    assert not c.passed and c.clobbered == ["A: 1 element changed, first at (3, 4)"]
    assert "wrote into its inputs: A: 1 element changed, first at (3, 4)" == c.summary()
    assert np.array_equal(p.main.A, pristine)
    # the next kernel sees the inputs as they were: its verdict does not depend on the one before
    assert p.verify(kernel(p, gemm)).passed


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_nan_written_into_b_is_a_change(dtype):
    p = problem(20, 30, 40, dtype=dtype)

    def nan_into_b(inputs):
        def launch():
            gemm(f32(inputs.A, p.dtype), f32(inputs.B, p.dtype), p.C)
            inputs.B[-1, -1] = np.nan if inputs.B.dtype.kind == "f" else 0x7FC0
        return launch
    c = p.verify(nan_into_b, sets=[p.main])
    assert c.clobbered == ["B: 1 element changed, first at (39, 29)"]


def test_compare_order_never_changes_a_verdict():
    """good, stomp, good: the second good kernel passes as the first did."""
    p = problem(50, 40, 30)

    def stomping(inputs):
        def launch():
            inputs.A[...] = 1.0
            gemm(f32(inputs.A, p.dtype), f32(inputs.B, p.dtype), p.C)
        return launch
    verdicts = [p.verify(k).passed for k in (kernel(p, gemm), stomping, kernel(p, gemm))]
    assert verdicts == [True, False, True]


# ---------------------------------------------------------------------------- epilogues

@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_epilogues_right_and_wrong(dtype):
    p = problem(70, 60, 200, dtype=dtype)

    def alpha_beta(inputs, alpha=ALPHA, beta=BETA):
        def launch():
            acc = f32(inputs.A, dtype) @ f32(inputs.B, dtype)
            p.C[...] = alpha * acc + beta * p.C  # C held C0 at the launch
        return launch

    def bias_relu(inputs, bias_scale=1.0):
        def launch():
            acc = f32(inputs.A, dtype) @ f32(inputs.B, dtype)
            p.C[...] = np.maximum(acc + bias_scale * inputs.bias, 0)
        return launch
    assert p.verify(alpha_beta, epilogue="alpha_beta").passed
    assert p.verify(bias_relu, epilogue="bias_relu").passed
    assert not p.verify(lambda i: alpha_beta(i, beta=0.0), epilogue="alpha_beta").passed  # ignores C0
    assert not p.verify(lambda i: alpha_beta(i, alpha=1.0), epilogue="alpha_beta").passed
    assert not p.verify(lambda i: bias_relu(i, bias_scale=0.0), epilogue="bias_relu").passed
    assert not p.verify(kernel(p, gemm), epilogue="bias_relu").passed  # no relu, no bias


def test_epilogue_reference_and_bound():
    ref, bnd = np.array([[2.0, -4.0]]), np.array([[0.1, 0.2]])
    c0, bias = np.array([[1.0, 1.0]]), np.array([1.0, 1.0])
    r, b = check.epilogue(np, "alpha_beta", ref, bnd, C0=c0)
    assert r.tolist() == [[ALPHA * 2 + BETA, ALPHA * -4 + BETA]]
    assert b[0, 0] == pytest.approx(ALPHA * 0.1 + 2 * check.U_FP32 * (ALPHA * 2 + abs(BETA)))
    r, b = check.epilogue(np, "bias_relu", ref, bnd, bias=bias)
    assert r.tolist() == [[3.0, 0.0]]
    assert b[0, 1] == pytest.approx(0.2 + 2 * check.U_FP32 * 3)
    with pytest.raises(ValueError, match="unknown EPILOGUE 'gelu': gemmlab knows none, alpha_beta, bias_relu"):
        check.epilogue(np, "gelu", ref, bnd)


# ---------------------------------------------------------------------------- the pieces

def test_bound_formula():
    ref, l2 = np.array([[3.0, -3.0]], np.float32), np.array([[2.0, 4.0]], np.float32)
    b = check.bound(np, ref, l2, 400, "fp32")
    assert b[0].tolist() == pytest.approx([10 * 20 * 2**-24 * 2, 10 * 20 * 2**-24 * 4])
    b = check.bound(np, ref, l2, 400, "tf32")
    assert b[0, 0] == pytest.approx(10 * ((20 + 100 / 3**0.5) * 2**-24 + 2**-10) * 2 + 2 * 2**-10 * 3)
    b = check.bound(np, ref, l2, 400, "bf16")  # the tensor cores' truncated additions: K / 16 of them
    assert b[0, 0] == pytest.approx(10 * (20 + 25 / 3**0.5) * 2**-24 * 2)
    assert check.bound(np, ref, l2, 400, "bf16", exact=True).tolist() == [[0, 0]]


def test_verdict_counts_nan_and_infinity_as_bad():
    ref, bnd = np.ones((4, 4), np.float32), np.full((4, 4), 0.1, np.float32)
    C = ref.copy()
    C[1, 2], C[3, 3] = np.nan, np.inf
    v = check.verdict(np, C, ref, bnd, "r", (2, 2))
    assert (v.bad, v.unwritten, v.passed) == (2, 1, False)
    assert v.tiles["listed"] == [[0, 1, 1], [1, 1, 1]] and v.first["i"] == 1 and v.first["j"] == 2


def test_tile_map_folds_many_tiles_into_cells():
    mask = np.zeros((4096, 4096), bool)
    mask[4000:, 100] = True  # the last row of 16 x 16 tiles, one column: 256 x 256 tiles in all
    t = check.tile_map(np, mask, (16, 16))
    assert t["grid"] == [256, 256] and t["bad"] == 6 and t["cell"] == [8, 4]
    assert len(t["map"]) == 32 and len(t["map"][0]) == 64
    assert t["map"][31][1] == 96 and sum(map(sum, t["map"])) == 96


def test_c_tile_from_the_parameters():
    assert c_tile({"BM": 128, "BN": 256}) == (128, 256)
    assert c_tile({"TILE": 16}) == (16, 16)
    assert c_tile({"BLOCK": 32}) == (32, 32)
    assert c_tile({"BM": 64, "COLS": 8}) == (64, 8)
    assert c_tile({"BM": 64}) == (64, 32)
    assert c_tile({}) == (32, 32)


def test_input_sets_differ_and_are_reproducible():
    p, q = problem(30, 20, 10, seed=3), problem(30, 20, 10, seed=3)
    sets = list(p.input_sets())
    assert [s.kind.name for s in sets] == ["random", "random x1000", "small integers"]
    assert np.array_equal(sets[0].A, q.main.A)
    assert float(np.abs(sets[1].A).mean()) > 100 * float(np.abs(sets[0].A).mean())
    ints = sets[2].A
    assert np.array_equal(ints, np.round(ints)) and ints.min() >= -4 and ints.max() <= 4 and sets[2].exact
    assert not sets[0].exact and not sets[1].exact


def test_integers_are_not_exact_past_fp32s_bits():
    from gemmlab.gpu.problem import Inputs
    big = Inputs(np, Shape(1, 1, 200_000), "fp32", 1, INPUT_SETS[2], False)
    assert not big.exact and big.bound[0, 0] > 0


# ---------------------------------------------------------------------------- what a user sees

def test_run_says_where_a_kernel_is_wrong_and_draws_it(fake_gpu, user_dir, tmp_path):
    """Through the CLI's whole flow (tests/handlers.py's FakeGpu hands back the check's verdict on a C
    with one 16 x 16 tile of zeros): the FAIL line, the terminal map and the PNG."""
    from conftest import GOOD_BODY, write_template
    from test_cli import invoke
    write_template(user_dir, "wrong", GOOD_BODY)
    png = tmp_path / "where.png"
    r = invoke("run", "--variant", "wrong", "--kernels-dir", user_dir, "--size", "64", "--show-errors",
               "--plot", png)
    assert r.exit_code == 1
    out = " ".join(r.output.split())
    assert ("FAIL wrong TILE=16: 256 elements out of bound on the random inputs; worst at (32, 16): expected 1, "
            "got 0 (bound 0.001); in 1 of 16 tiles of 16 x 16; its time is not reported") in out
    assert "wrong: 1 of 16 tiles of 16 x 16 hold elements out of bound (C is 4 x 4 tiles)" in out
    lines = [line.strip() for line in r.output.splitlines()]
    assert lines[lines.index("0 ····") + 2] == "2 ·█··"  # the tile at row 2, column 1
    assert "first bad element (32, 16) is in tile (2, 1)" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_clock_summary():
    from gemmlab.gpu.clocks import summarize
    assert summarize([], 0) is None
    s = summarize([1980, 1755, 1410, 1980, 1800], 0x4 | 0x40 | 0x1)
    assert s == {"sm_mhz": [1410, 1800, 1980], "samples": 5, "throttle": ["power cap", "thermal (hardware)"]}


def test_clock_note_only_where_the_clock_was_held_down():
    from gemmlab.results.records import clock_note
    assert clock_note({"clocks": None}) is None
    assert clock_note({"clocks": {"sm_mhz": [1980, 1980, 1980], "samples": 9, "throttle": []}}) is None
    # a brief dip under the power cap, the median at the top clock: not what made the row slow
    assert clock_note({"clocks": {"sm_mhz": [1740, 1980, 1980], "samples": 9, "throttle": ["power cap"]}}) is None
    assert clock_note({"clocks": {"sm_mhz": [1410, 1755, 1980], "samples": 9, "throttle": ["power cap"]}}) == \
        "SM clock 1410-1980 MHz (median 1755) while timed, held down by: power cap"


def test_rounds_keep_every_sample_and_clock():
    from gemmlab.jobs import merge_rounds
    from gemmlab.results.model import Result, Timing
    rs = [Result("k", {}, Shape(8, 8, 8), check=check.Check(1e-7, 0.0, "r"),
                 timing=Timing(m, m, m, 3, samples=[m] * 3,
                               clocks={"sm_mhz": [lo, 1700, 1900], "samples": 4, "throttle": t}))
          for m, lo, t in ((1.0, 1500, ["power cap"]), (2.0, 1400, []), (3.0, 1600, ["thermal (software)"]))]
    t = merge_rounds(rs).timing
    assert t.median_ms == 2.0 and t.samples == [1.0] * 3 + [2.0] * 3 + [3.0] * 3
    assert t.clocks == {"sm_mhz": [1400, 1700, 1900], "samples": 12, "throttle": ["power cap", "thermal (software)"]}


def test_run_checks_its_plot_file_before_anything_runs(tmp_path):
    from test_cli import invoke
    taken = tmp_path / "taken.png"
    taken.write_bytes(b"mine")
    r = invoke("run", "--variant", "tiled", "--plot", taken)
    assert r.exit_code == 1 and "already exists; gemmlab does not overwrite it" in r.output
    assert taken.read_bytes() == b"mine"
    r = invoke("run", "--variant", "tiled", "--plot", tmp_path / "nosuch" / "map.png")
    assert r.exit_code == 1 and "--plot" in r.output and "no such directory" in r.output


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
def test_a_and_b_are_fenced_by_nan(dtype):
    """A read past either end of A or B must meet NaN (which the check reports), not finite bytes that,
    times a tile's zero padding, would leave C right and the read unseen."""
    from gemmlab.gpu.problem import FENCE, Inputs, from_bf16
    inputs = Inputs(np, Shape(5, 7, 3), dtype, 1, INPUT_SETS[0], False)
    for x in (inputs.A, inputs.B):
        assert x.flags["C_CONTIGUOUS"] and x.base.size == x.size + 2 * FENCE
        whole = x.base.reshape(-1)
        start = (x.__array_interface__["data"][0] - whole.__array_interface__["data"][0]) // x.itemsize
        assert start == FENCE and FENCE * x.itemsize % 256 == 0  # keeps A's 16-byte (TMA) alignment
        fence = np.concatenate([whole[:FENCE], whole[FENCE + x.size:]])
        values = from_bf16(fence) if dtype == "bf16" else fence
        assert fence.size == 2 * FENCE and np.isnan(values).all()
        assert not np.isnan(from_bf16(x) if dtype == "bf16" else x).any()
    assert inputs.guard(np) == []  # the pristine copies are the fenced inputs' values
