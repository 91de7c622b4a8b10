"""histogram: y[b] = how many of n bytes equal b, for 256 bins (y is int32[256]). Read n bytes, write
1 KB; every element is an increment of a counter that many threads share, so how the values spread
matters: uniform bytes spread the increments over 256 counters, skewed ones (half of them in one bin,
a quarter in the next, ...) pile them on a few, where atomics wait for each other. Counts are exact.
Out-of-range reads show too: the bytes around x are 255, which a kernel that reads them counts."""

from __future__ import annotations

from .declaration import Declaration, InputSet

BINS = 256


def _make(xp, shape, rng, kind):
    n = shape.N
    if kind == "uniform":
        x = rng.integers(0, BINS, n)
    elif kind == "skewed":  # geometric: P(b) = 2^-(b+1), so bin 0 holds half of them
        x = xp.minimum(xp.floor(-xp.log2(1.0 - rng.random(n))), BINS - 1)
    else:  # "one": every byte the same bin, the worst contention there is
        x = xp.full(n, 7)
    return {"x": x.astype(xp.uint8)}


def _expect(xp, inputs, shape, kind):
    ref = xp.bincount(inputs["x"], minlength=BINS).astype(xp.float64)
    return ref, xp.zeros_like(ref)


def _reference(xp, inputs, y):
    return lambda: xp.bincount(inputs["x"], minlength=BINS)  # int64 counts in a new array, as a user gets them


DECLARATION = Declaration(
    name="histogram", what="y[b] = count of the n bytes x[i] == b, 256 bins (y is int32[256])",
    reference_name="cupy.bincount",
    args={"x": "const unsigned char* input, n bytes", "y": "int* output, 256 counters", "n": "int: elements",
          "workspace": "launch.workspace bytes of scratch"},
    make=_make, output=lambda xp, shape: xp.empty(BINS, dtype=xp.int32), expect=_expect,
    reference=_reference, sizes=lambda s: {"n": s.N}, moved=lambda s: s.N + 4 * BINS, ops=lambda s: s.N,
    best="shared_atomic", input_sets=(InputSet("uniform", "uniform", 0), InputSet("skewed", "skewed", 7919),
                                      InputSet("one bin", "one", 104729)),
    poison=-1, tile=(1, 256))
