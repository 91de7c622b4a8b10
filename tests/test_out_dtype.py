"""C in 16 bits (--out-dtype) on a CPU: the check's bound for a C rounded as it is stored, the rungs that
write one, and auto's choice for it. numpy stands in for cupy, as in test_check.py."""

import numpy as np
import pytest

from gemmlab.errors import GemmlabError
from gemmlab.gpu.problem import INPUT_SETS, Problem, from_bf16, to_bf16
from gemmlab.render import render
from gemmlab.results import check, tuning
from gemmlab.results.check import ALPHA, BETA
from gemmlab.results.model import Shape
import gemmlab

from test_check import f32, truncated_blocks


def problem(M, N, K, dtype, out, seed=11):
    return Problem(Shape(M, N, K), seed=seed, dtype=dtype, xp=np, out_dtype=out)


def store(p, values, rounding="nearest"):
    """Write FP32 values into the problem's C as a kernel of its C type does."""
    if p.out_dtype == "bf16":
        bits = to_bf16(values) if rounding == "nearest" else (values.view(np.uint32) >> 16).astype(np.uint16)
        p.C[...] = bits
    elif p.out_dtype == "fp16":
        p.C[...] = values.astype(np.float16)
    else:
        p.C[...] = values


def kernel(p, body, **how):
    """launch_on: the tensor cores' FP32 sums (truncated blocks of 16), `body` applied, stored in C's type."""
    def on(inputs):
        def launch():
            acc = np.zeros(p.C.shape, np.float32)
            truncated_blocks(f32(inputs.A, p.dtype), f32(inputs.B, p.dtype), acc)
            store(p, body(acc, p), **how)
        return launch
    return on


def c_as_float(p):
    return from_bf16(p.C) if p.out_dtype == "bf16" else p.C.astype(np.float32)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", [(1, 8, 1), (33, 40, 70), (64, 96, 1000)])
def test_a_right_16_bit_c_passes_every_input_set(dtype, shape):
    p = problem(*shape, dtype, dtype)
    assert p.C.dtype == (np.uint16 if dtype == "bf16" else np.float16)
    c = p.verify(kernel(p, lambda acc, p: acc))
    assert c.passed, c.summary()


def test_the_fp16_cs_large_set_is_made_small_enough_to_fit():
    """Inputs of size 1000 give sums far past fp16's 65504: that set is made smaller for an fp16 C, and says
    so in its name, so that the check judges the kernel, not the type's range."""
    p = problem(16, 16, 4096, "fp16", "fp16")
    sets = list(p.input_sets())
    big = sets[1]
    assert big.kind.name.startswith("random x") and big.kind.name.endswith("(fp16 C)")
    assert 3 < big.kind.scale < 3.3 and big.kind.seed_offset == INPUT_SETS[1].seed_offset
    assert float(np.abs(big.ref).max()) < check.FP16_MAX / 4
    assert problem(16, 16, 4096, "fp16", "fp32").input_sets() is not None
    assert [s.kind.name for s in problem(16, 16, 64, "bf16", "bf16").input_sets()] == [k.name for k in INPUT_SETS]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_rounding_toward_zero_fails_on_the_exact_inputs(dtype):
    """Small integers sum exactly in FP32: C must then be the sum rounded to nearest, bit for bit."""
    p = problem(40, 48, 64, dtype, dtype)
    if dtype == "fp16":
        def body(acc, p):  # fp16: one step toward zero where rounding went up
            near = acc.astype(np.float16)
            return np.where(np.abs(near.astype(np.float32)) > np.abs(acc),
                            np.nextafter(near, np.float16(0)), near).astype(np.float32)
        c = p.verify(kernel(p, body))
    else:
        c = p.verify(kernel(p, lambda acc, p: acc, rounding="toward zero"))
    assert not c.passed and c.inputs in ("small integers", "random")


def test_a_c_rounded_twice_as_coarsely_fails():
    """A C that keeps one bit less than bf16 (a store through a narrower type) is past the bound."""
    p = problem(64, 64, 256, "bf16", "bf16")

    def coarse(acc, p):
        u = acc.view(np.uint32)
        return ((u + 0x10000) & 0xFFFE0000).astype(np.uint32).view(np.float32)
    c = p.verify(kernel(p, coarse))
    assert not c.passed and c.bad > 0


def test_unwritten_elements_of_a_16_bit_c_fail():
    p = problem(30, 24, 32, "bf16", "bf16")

    def last_column_skipped(acc, p):
        out = acc.copy()
        out[:, -1] = np.nan  # store() writes the NaN through: as if never written (C is poisoned with NaN)
        return out
    c = p.verify(kernel(p, last_column_skipped))
    assert not c.passed and c.unwritten == 30 and c.first["j"] == 23


def test_alpha_beta_reads_the_16_bit_c_it_is_given():
    """beta * C reads C as the 16-bit C holds it (the rounded C0), and writes the result rounded."""
    p = problem(24, 32, 48, "bf16", "bf16")
    seen = []

    def epilogue(acc, p):
        old = c_as_float(p)
        seen.append(old.copy())
        return ALPHA * acc + BETA * old
    c = p.verify(kernel(p, epilogue), epilogue="alpha_beta")
    assert c.passed, c.summary()
    assert len(seen) == len(INPUT_SETS) and np.array_equal(seen[0], check.round_out(np, p.main.C0, "bf16"))
    assert not np.array_equal(seen[0], p.main.C0)


def test_round_out_is_round_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -(1.0 + 2**-9), 65519.0, 3.0e-8], np.float32)
    assert check.round_out(np, x, "bf16").tolist() == [1.0, 1.0, 1.0 + 2**-6, -1.0, 65536.0, float(np.float32(from_bf16(to_bf16(np.float32([3.0e-8])))[0]))]
    assert check.round_out(np, x, "fp16")[:4].tolist() == [1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -(1.0 + 2**-9)]
    assert check.round_out(np, x, "fp32") is x


def test_the_bound_grows_by_the_rounding_of_c():
    ref, bnd = np.array([[1.0, -300.0]], np.float32), np.array([[1e-6, 2e-6]], np.float32)
    r, b = check.output(np, ref, bnd, "bf16")
    assert r is ref and np.allclose(b, bnd + 2**-8 * (np.abs(ref) + bnd))
    r, b = check.output(np, ref, bnd, "fp16")
    assert np.allclose(b, bnd + 2**-11 * (np.abs(ref) + bnd) + 2**-25)
    r, b = check.output(np, ref, bnd, "bf16", exact=True)
    assert b is bnd and r.tolist() == [[1.0, -300.0]]
    assert check.output(np, ref, bnd, "fp32") == (ref, bnd)


def test_a_problem_refuses_a_c_type_its_inputs_do_not_have():
    with pytest.raises(GemmlabError, match="C can be fp32 or the inputs' own 16-bit type, not fp16 for bf16 inputs"):
        problem(8, 8, 8, "bf16", "fp16")
    with pytest.raises(GemmlabError, match="not bf16 for fp32 inputs"):
        problem(8, 8, 8, "fp32", "bf16")


@pytest.mark.parametrize("name", ["wmma", "mma", "wgmma", "wgmma_ws", "wgmma_pingpong"])
def test_the_tensor_core_rungs_write_a_16_bit_c(name):
    v = gemmlab.catalog().get(name)
    params = v.resolve(v.for_dtype("fp16", None, "fp16"))
    assert params["OUT_DTYPE"] == "fp16" and v.out_dtype(params) == "fp16"
    src = render(v, params).source
    assert "__half* __restrict__ C" in src and "float* __restrict__ C" not in src
    assert "__float2half_rn" in src or "__floats2half2_rn" in src
    fp32 = render(v, v.resolve(v.for_dtype("fp16"))).source
    assert "float* __restrict__ C" in fp32 and "__floats2half2_rn" not in fp32


def test_out_dtype_is_checked_against_the_variant():
    with pytest.raises(GemmlabError, match="variant 'tiled' writes C in fp32 only, not bf16"):
        gemmlab.catalog().get("tiled").for_dtype("fp32", None, "bf16")
    v = gemmlab.catalog().get("mma")
    with pytest.raises(GemmlabError, match="--out-dtype bf16 and -p OUT_DTYPE=fp32 disagree"):
        v.for_dtype("bf16", {"OUT_DTYPE": "fp32"}, "bf16")
    with pytest.raises(GemmlabError, match="OUT_DTYPE == 'fp32' or OUT_DTYPE == DTYPE"):
        v.resolve(v.for_dtype("bf16", None, "fp16"))
    with pytest.raises(GemmlabError, match="SPLIT_K == 1 or OUT_DTYPE == 'fp32'"):
        v.resolve(v.for_dtype("bf16", {"SPLIT_K": 4}, "bf16"))
    assert gemmlab.catalog().get("tiled").for_dtype("fp32", None, "fp32") == {}


@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 4096, 4096), (100, 1000, 1000), (7, 999, 4096)])
def test_auto_takes_no_split_and_no_gemv_for_a_16_bit_c(shape):
    s = Shape(*shape)
    v, params, how = tuning.choose(gemmlab.catalog(), "NVIDIA H100 80GB HBM3", s, 132, "bf16", "bf16")
    assert v.name != "gemv" and params.get("SPLIT_K", 1) == 1 and params["OUT_DTYPE"] == "bf16", how
    v32, params32, _ = tuning.choose(gemmlab.catalog(), "NVIDIA H100 80GB HBM3", s, 132, "bf16")
    assert params32.get("OUT_DTYPE", "fp32") == "fp32"
    if shape[0] == 1:
        assert v32.name == "gemv"


def test_every_measuring_command_takes_out_dtype_and_reproduces_it():
    """--out-dtype reaches the worker's Problem (the setup a worker starts from) and the command that
    measures the same again; a variant that cannot write such a C is one clear error."""
    from click.testing import CliRunner
    from gemmlab import api
    from gemmlab.cli import cli
    from gemmlab.jobs import Options, setup
    for name in ("run", "compare", "sweep", "suite"):
        assert "--out-dtype" in {o for p in cli.commands[name].params for o in p.opts}, name
    s = Shape(8, 8, 8)
    assert setup(s, 1, Options(dtype="bf16")) == (s, 1, False, "bf16")
    assert setup(s, 1, Options(dtype="bf16", out_dtype="bf16")) == (s, 1, False, "bf16", None, "bf16")
    opts = Options(dtype="bf16", out_dtype="bf16")
    argv = api._argv("compare", s, opts, {"seed": 3}, (), [])
    assert argv[argv.index("--out-dtype") + 1] == "bf16"
    assert "--out-dtype" not in api._argv("compare", s, Options(dtype="bf16"), {"seed": 3}, (), [])
    r = CliRunner().invoke(cli, ["run", "--variant", "tiled", "--out-dtype", "bf16"])
    assert r.exit_code == 1 and "variant 'tiled' writes C in fp32 only, not bf16" in r.output
    r = CliRunner().invoke(cli, ["sweep", "--variant", "mma", "--dtype", "bf16", "--param", "OUT_DTYPE=fp32,bf16"])
    assert r.exit_code == 1 and "a sweep runs one C type; choose it with --out-dtype" in r.output


def test_a_timed_kernel_is_checked_again_and_loses_its_time_if_wrong(monkeypatch):
    """time_then_check (GEMM's Problem and the other problems share it), with a stand-in for the GPU's
    timer: a launch right every time keeps its timing; one that writes into A while timed is caught, put
    right, and not timed; one right only on its first launch is caught by the check after the timing."""
    import gemmlab.gpu.problem as gp
    from gemmlab.results.model import Result, Timing
    monkeypatch.setattr(gp, "bench", lambda launch, min_reps, phase: (launch(), launch(),
                                                                      Timing(1.0, 1.0, 1.0, 2))[-1])
    p = problem(33, 40, 70, "bf16", "bf16")
    right = kernel(p, lambda acc, p: acc)
    r = Result("k", {}, p.shape)
    r.check = p.verify(right)
    p._timed(r, right(p.main), (32, 32), None, 2, None)
    assert r.check.passed and r.timing is not None

    def clobbers():
        right(p.main)()
        p.main.A[0, 0] ^= 1
    r = Result("k", {}, p.shape)
    p._timed(r, clobbers, (32, 32), None, 2, None)
    assert r.timing is None and r.check.clobbered == ["A: 1 element changed, first at (0, 0)"]
    assert np.array_equal(p.main.A, p.main.pristine["A"])

    calls = []

    def first_only():
        calls.append(1)
        store(p, np.zeros(p.C.shape, np.float32) if len(calls) > 1 else np.ones(p.C.shape, np.float32))
    r = Result("k", {}, p.shape)
    p._timed(r, first_only, (32, 32), None, 2, None)
    assert r.timing is None and not r.check.passed
