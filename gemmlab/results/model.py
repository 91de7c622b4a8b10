"""The row model: a problem's shape, and what one run of a kernel (or cuBLAS) came to.

A Result is what the GPU side hands back (gemmlab/gpu/problem.py); gemmlab/results/rows.py flattens
it into the plain row that tables, files and the history take. Nothing here needs a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GemmlabError
from ..results.check import Check

ITEM_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "e4m3": 1, "e5m2": 1}
FLUSH_BYTES = 256 << 20  # the L2 flush buffer (gemmlab/gpu/bench.py): larger than any L2 so far (H100: 50 MB)
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Shape:
    M: int
    N: int
    K: int

    def __post_init__(self):
        for n in ("M", "N", "K"):
            v = getattr(self, n)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise GemmlabError(f"{n} must be a positive integer, not {v!r}")
        for what, elems in (("A (M x K)", self.M * self.K), ("B (K x N)", self.K * self.N),
                            ("C (M x N)", self.M * self.N)):
            if elems > INT32_MAX:
                raise GemmlabError(f"{what} of shape {self} has {elems} elements; the kernels index "
                                   f"with 32-bit integers, so at most {INT32_MAX}")

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    def __str__(self) -> str:
        return f"{self.M}x{self.N}x{self.K}"

    def bytes_needed(self, fp64_check: bool = False, dtype: str = "fp32") -> int:
        """GPU memory for a run: two sets of inputs at a time (the timed one, and one of the others while
        it is checked), each A and B in their type with pristine copies, the reference and the bound;
        C, C0 and the check's temporaries; the FP32 copies made while inputs are generated; the flush
        buffer. In float64 where the reference is."""
        mk, kn, mn = self.M * self.K, self.K * self.N, self.M * self.N
        item, r = ITEM_BYTES[dtype], 8 if fp64_check else 4
        per_set = 2 * item * (mk + kn) + 2 * r * mn
        return 2 * per_set + 8 * mn + 4 * r * mn + 8 * (mk + kn) + FLUSH_BYTES


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    reps: int
    rounds: list[float] | None = None  # each round's median, where the time is the median of several rounds
    samples: list[float] | None = None  # every timed repetition, ms: the noise of a comparison comes from them
    clocks: dict | None = None  # the SM clock and throttle reasons while it was timed (clocks.py), if NVML is there


@dataclass
class Result:
    """One row: a variant (or cuBLAS) at one parameter set on one shape."""
    name: str
    params: dict
    shape: Shape
    check: Check | None = None
    timing: Timing | None = None
    resources: object = None  # compile.Resources
    geometry: object = None   # templates.Geometry
    blocks_per_sm: int | None = None
    compile_ms: float | None = None
    cached: bool | None = None
    source: str = ""
    user: bool = False
    dtype: str = "fp32"
    error: str | None = None
    fault: str | None = None  # CRASHED or TIMEOUT: the kernel took its process down (error says how)
    flops: int | None = None  # the operations its TFLOP/s counts, where they are not GEMM's 2 M N K (problems/)
    extra: dict | None = None  # more fields for its row: a problem's bandwidth numbers (gpu/problems.py)

    @property
    def status(self) -> str:
        if self.fault:
            return self.fault
        if self.error:
            return "ERROR"
        if self.check is None:
            return "-"
        return "PASS" if self.check.passed else "FAIL"

    @property
    def valid_time(self) -> float | None:
        """The median time, only for a result that was checked and passed."""
        return self.timing.median_ms if self.timing and self.check and self.check.passed else None
