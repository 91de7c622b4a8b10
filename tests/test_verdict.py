"""results/check.py's pieces field by field, on a CPU: every number and word of a verdict exactly, the
types the bound and its arrays keep (on the GPU a float64 copy of a C-sized array is memory the check
may not have), and the messages a user reads. Written from the mutants that tests/test_check.py, which
judges whole kernels, let through (docs/testing.md, "Mutation testing")."""

import json
import math
import warnings

import numpy as np
import pytest

from gemmlab.results import check
from gemmlab.results.check import Check


# ---------------------------------------------------------------------------- the bound's arrays


def test_the_bound_and_the_epilogues_keep_the_references_type():
    ref = np.array([[3.0, -3.0]], np.float32)
    for l2 in (np.array([[2.0, 4.0]], np.float32), np.array([[2.0, 4.0]], np.float64)):
        assert check.bound(np, ref, l2, 400, "fp32").dtype == np.float32
    assert check.bound(np, ref, ref, 400, "fp32", exact=True).dtype == np.float32
    bnd = np.array([[0.1, 0.2]], np.float32)
    c0, bias = np.array([[1.0, 1.0]], np.float64), np.array([1.0, 1.0], np.float64)
    for kind, extra in (("alpha_beta", {"C0": c0}), ("bias_relu", {"bias": bias})):
        r, b = check.epilogue(np, kind, ref, bnd, **extra)
        assert (r.dtype, b.dtype) == (np.float32, np.float32), kind


def test_bias_relu_adds_one_rounding_of_the_sum():
    ref, bnd = np.array([[2.0, -4.0]]), np.array([[0.5, 0.25]])
    r, b = check.epilogue(np, "bias_relu", ref, bnd, bias=np.array([1.0, 1.0]))
    assert r.tolist() == [[3.0, 0.0]]
    assert b.tolist() == [[0.5 + 2 * check.U_FP32 * 3, 0.25 + 2 * check.U_FP32 * 3]]


# ---------------------------------------------------------------------------- verdict's numbers


def test_a_verdict_in_numbers():
    ref = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)  # ||ref|| = 5
    C = ref + np.array([[0.0, 0.5], [1.5, 0.0]], np.float32)  # ||C - ref|| = sqrt(2.5)
    bnd = np.full((2, 2), 1.0, np.float32)
    v = check.verdict(np, C, ref, bnd, "the reference")
    assert v.reference == "the reference" and v.inputs == "random"
    assert v.rel_err == pytest.approx(math.sqrt(2.5) / 5, rel=1e-6) and v.max_abs_err == 1.5
    assert (v.bad, v.unwritten, v.ratio) == (1, 0, 1.5)
    assert v.worst == v.first == {"i": 1, "j": 0, "expected": 0.0, "got": 1.5, "bound": 1.0}


def test_rel_err_against_a_zero_reference_is_the_absolute_error():
    ref, bnd = np.zeros((2, 2), np.float32), np.full((2, 2), 10.0, np.float32)
    C = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    v = check.verdict(np, C, ref, bnd, "r")
    assert v.rel_err == 5.0 and v.passed


def test_a_nan_makes_rel_err_infinite():
    ref, bnd = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
    C = ref.copy()
    C[0, 1] = np.nan
    v = check.verdict(np, C, ref, bnd, "r")
    assert v.rel_err == v.max_abs_err == math.inf and v.unwritten == 1


def test_the_difference_is_taken_in_the_references_type():
    """C is not copied to float64 first: in float32, 1 - 2^-30 is 1."""
    ref, bnd = np.array([[2.0 ** -30]], np.float32), np.array([[2.0]], np.float32)
    v = check.verdict(np, np.array([[1.0]], np.float32), ref, bnd, "r")
    assert v.max_abs_err == 1.0 and v.ratio == 0.5


def test_exact_inputs_that_match_have_ratio_0_and_divide_by_no_zero():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "divide by zero" where the bound is 0
        v = check.verdict(np, ref.copy(), ref, np.zeros_like(ref), "r")
    assert v.passed and v.ratio == 0.0 and v.max_abs_err == 0.0


def test_the_default_tile_is_32_by_32():
    ref, bnd = np.zeros((64, 96), np.float32), np.zeros((64, 96), np.float32)
    C = ref.copy()
    C[40, 70] = 1.0
    t = check.verdict(np, C, ref, bnd, "r").tiles
    assert (t["tile"], t["grid"], t["listed"]) == ([32, 32], [2, 3], [[1, 2, 1]])


# ---------------------------------------------------------------------------- tile_map


def test_tile_map_of_rectangular_tiles():
    mask = np.zeros((10, 12), bool)
    mask[9, 0] = mask[0, 11] = True
    t = check.tile_map(np, mask, (2, 6))  # 5 x 2 tiles of 2 rows x 6 columns
    assert t == {"tile": [2, 6], "grid": [5, 2], "bad": 2, "total": 10, "listed": [[0, 1, 1], [4, 0, 1]],
                 "cell": [1, 1], "map": [[0, 1], [0, 0], [0, 0], [0, 0], [1, 0]]}
    assert json.dumps(t["map"]) == "[[0, 1], [0, 0], [0, 0], [0, 0], [1, 0]]"  # counts, not 1.0


@pytest.mark.parametrize("shape,tile,want", [((1, 4), (32, 32), [1, 4]), ((4, 1), (32, 32), [4, 1]),
                                             ((4, 4), (1, 1), [1, 1])])
def test_tile_map_of_one_row_or_column(shape, tile, want):
    mask = np.ones(shape, bool)
    t = check.tile_map(np, mask, tile)
    assert t["tile"] == want and t["bad"] == t["total"] == t["grid"][0] * t["grid"][1]


# ---------------------------------------------------------------------------- what the user reads


def test_summary_words():
    assert Check(0.0, 0.0, "r").summary() == "every element within its bound"
    two = Check(0.0, 0.0, "r", clobbered=["A: 1 element changed, first at (0, 0)", "B: 2 elements changed, first at (1, 2)"])
    assert two.summary() == ("wrote into its inputs: A: 1 element changed, first at (0, 0); "
                             "B: 2 elements changed, first at (1, 2)")
    assert Check(1.0, 1.0, "r", bad=1).summary() == "1 element out of bound on the random inputs"
    assert Check(1.0, 1.0, "r", bad=2).summary() == "2 elements out of bound on the random inputs"
    assert Check(1.0, 1.0, "r", bad=0, unwritten=0, inputs="large").summary() == "every element within its bound"
    tiles = {"bad": 3, "total": 12, "tile": [64, 128]}
    assert Check(1.0, 1.0, "r", bad=5, tiles=tiles).summary() == (
        "5 elements out of bound on the random inputs; in 3 of 12 tiles of 64 x 128")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.uint16, np.uint8])
def test_changed_in_every_width(dtype):
    pristine = np.zeros((3, 4), dtype)
    now = pristine.copy()
    assert check.changed(np, "A", now, pristine) is None
    now[1, 2] = 1
    assert check.changed(np, "A", now, pristine) == "A: 1 element changed, first at (1, 2)"
    now[2, 3] = 1
    assert check.changed(np, "A", now, pristine) == "A: 2 elements changed, first at (1, 2)"


def test_changed_in_a_vector():
    pristine = np.zeros(5, np.float32)
    now = pristine.copy()
    now[3] = np.nan
    assert check.changed(np, "bias", now, pristine) == "bias: 1 element changed, first at (3)"
