"""copy: y = x, n float32 values. The roofline of the memory-bound problems: nothing but the bytes
(read n, write n), so a copy kernel measures the bandwidth the others are held to."""

from __future__ import annotations

from .declaration import Declaration, floats


def _make(xp, shape, rng, kind):
    return {"x": floats(xp, rng, shape.N, kind)}


def _expect(xp, inputs, shape, kind):
    x = inputs["x"].astype(xp.float64)
    return x, xp.zeros_like(x)  # exact: a copy changes no bit


def _reference(xp, inputs, y):
    return lambda: xp.copyto(y, inputs["x"])


DECLARATION = Declaration(
    name="copy", what="y = x (float32): the bandwidth every memory-bound kernel is held to",
    reference_name="cupy.copyto",
    args={"x": "const float* input, n elements", "y": "float* output, n elements", "n": "int: elements"},
    make=_make, output=lambda xp, shape: xp.empty(shape.N, dtype=xp.float32), expect=_expect,
    reference=_reference, sizes=lambda s: {"n": s.N}, moved=lambda s: 8 * s.N, ops=lambda s: 0, best="copy_vec")
