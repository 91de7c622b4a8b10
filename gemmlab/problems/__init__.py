"""The problems besides GEMM, each declared once: how its inputs are made, what the output must be
(its reference and each element's bound), the reference that is timed beside the kernels, and its
cost model (the bytes it must move, the operations it does). The deep dive's building blocks: copy,
transpose, reduce (sum), scan (inclusive prefix sum) and histogram.

A problem is data, not a code path: a template says `problem = "reduce"` in its header and lists the
arguments its kernel takes in launch.args, by the names its problem provides (`args` below); the run,
the check and the timing are the same for every problem (gemmlab/gpu/problems.py). GEMM keeps its own
path (gemmlab/gpu/problem.py), and is declared here only by name, so that every command knows it.

Shapes: a problem over a vector of n elements has the shape 1 x n x 1 (launch expressions see n as N);
transpose has M rows and N columns (K = 1). Nothing here needs a GPU: `xp` is cupy on the GPU and
numpy in the tests.
"""

from __future__ import annotations

import difflib

from ..errors import GemmlabError
from .declaration import Declaration, InputSet
from . import copy, histogram, reduce, scan, transpose

# GEMM is the default problem: its inputs, check and timing are gemmlab/gpu/problem.py's.
GEMM = "gemm"
DECLARATIONS: dict[str, Declaration] = {d.name: d for d in (copy.DECLARATION, transpose.DECLARATION,
                                                            reduce.DECLARATION, scan.DECLARATION,
                                                            histogram.DECLARATION)}
NAMES = (GEMM,) + tuple(DECLARATIONS)
WHAT = {GEMM: "C = A @ B, row-major; checked against cuBLAS (cupy.matmul)",
        **{d.name: d.what for d in DECLARATIONS.values()}}


def check_name(name: str) -> str:
    """`name` if it is a problem gemmlab knows, else one clear error."""
    if name in NAMES:
        return name
    near = difflib.get_close_matches(name, NAMES, n=1)
    raise GemmlabError(f"unknown problem '{name}'" + (f" (did you mean {near[0]}?)" if near else "")
                       + f"; the problems: {', '.join(NAMES)}")


def get(name: str) -> Declaration:
    """The declaration of a problem other than GEMM."""
    check_name(name)
    if name == GEMM:
        raise GemmlabError("gemm is not declared here: its path is gemmlab/gpu/problem.py")
    return DECLARATIONS[name]


__all__ = ["Declaration", "InputSet", "DECLARATIONS", "GEMM", "NAMES", "WHAT", "check_name", "get"]
