"""scan: the inclusive prefix sum, y[i] = x[0] + ... + x[i], n float32 values. Read n, write n, like a
copy, though each output depends on every input before it: the ladder (kernels/scan/) is about passing
that dependence between blocks without a second trip through memory. Element i is a float sum of i + 1
terms, bounded as declaration.py says; small integers are exact while 4 n < 2^24."""

from __future__ import annotations

from .declaration import Declaration, exact_sum, floats, sum_bound


def _make(xp, shape, rng, kind):
    return {"x": floats(xp, rng, shape.N, kind)}


def _expect(xp, inputs, shape, kind):
    x = inputs["x"].astype(xp.float64)
    ref = xp.cumsum(x)
    if exact_sum(kind, shape.N):
        return ref, xp.zeros_like(ref)
    terms = xp.arange(1, shape.N + 1, dtype=xp.float64)
    return ref, sum_bound(terms, xp.sqrt(xp.cumsum(x * x)), ref)


def _reference(xp, inputs, y):
    return lambda: xp.cumsum(inputs["x"], out=y)


DECLARATION = Declaration(
    name="scan", what="y[i] = x[0] + ... + x[i] (inclusive prefix sum), n float32 values",
    reference_name="cupy.cumsum", check_name="float64 cupy.cumsum",
    args={"x": "const float* input, n elements", "y": "float* output, n elements", "n": "int: elements",
          "workspace": "launch.workspace bytes of scratch"},
    make=_make, output=lambda xp, shape: xp.empty(shape.N, dtype=xp.float32), expect=_expect,
    reference=_reference, sizes=lambda s: {"n": s.N}, moved=lambda s: 8 * s.N, ops=lambda s: s.N - 1, best="prefetch")
