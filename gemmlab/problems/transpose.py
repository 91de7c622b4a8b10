"""transpose: y = x^T, x of M rows and N columns (float32, row-major), y of N rows and M columns. No
arithmetic: read every element once, write it once. The naive kernel reads rows and writes columns;
the ladder (kernels/transpose/) turns the columns into rows through shared memory."""

from __future__ import annotations

from .declaration import MATRIX_SIZES, Declaration, floats


def _make(xp, shape, rng, kind):
    return {"x": floats(xp, rng, shape.M * shape.N, kind).reshape(shape.M, shape.N)}


def _expect(xp, inputs, shape, kind):
    ref = inputs["x"].T.astype(xp.float64)
    return ref, xp.zeros_like(ref)  # exact: moving a value changes no bit


def _reference(xp, inputs, y):
    return lambda: xp.copyto(y, inputs["x"].T)  # what x.T.copy() runs, into y instead of a new array


DECLARATION = Declaration(
    name="transpose", what="y = x^T, x of M x N float32 (row-major): every element read once and written once",
    reference_name="cupy x.T.copy()",
    args={"x": "const float* input, M x N row-major", "y": "float* output, N x M row-major",
          "rows": "int: M", "cols": "int: N"},
    make=_make, output=lambda xp, shape: xp.empty((shape.N, shape.M), dtype=xp.float32), expect=_expect,
    reference=_reference, sizes=lambda s: {"rows": s.M, "cols": s.N}, moved=lambda s: 8 * s.M * s.N,
    ops=lambda s: 0, best="vec_tile", vector=False, suite_sizes=MATRIX_SIZES, default_size=8192, tile=(32, 32))
