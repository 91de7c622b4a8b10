"""reduce: y[0] = the sum of n float32 values. Read n, write one: as memory-bound as a copy, with
half its bytes. The float sum's bound is in declaration.py; small integers are summed exactly."""

from __future__ import annotations

from .declaration import Declaration, exact_sum, floats, sum_bound


def _make(xp, shape, rng, kind):
    return {"x": floats(xp, rng, shape.N, kind)}


def _expect(xp, inputs, shape, kind):
    x = inputs["x"].astype(xp.float64)
    ref = x.sum().reshape(1)
    if exact_sum(kind, shape.N):
        return ref, xp.zeros_like(ref)
    return ref, sum_bound(shape.N, xp.sqrt((x * x).sum()).reshape(1), ref)


def _reference(xp, inputs, y):
    out = y.reshape(())
    return lambda: xp.sum(inputs["x"], out=out)


DECLARATION = Declaration(
    name="reduce", what="y[0] = sum of n float32 values (y is float[1])",
    reference_name="cupy.sum", check_name="float64 cupy.sum",
    args={"x": "const float* input, n elements", "y": "float* output, one element", "n": "int: elements",
          "workspace": "launch.workspace bytes of scratch"},
    make=_make, output=lambda xp, shape: xp.empty(1, dtype=xp.float32), expect=_expect,
    reference=_reference, sizes=lambda s: {"n": s.N}, moved=lambda s: 4 * s.N + 4, ops=lambda s: s.N - 1, best="shfl",
    tile=(1, 1))
