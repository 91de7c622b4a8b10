"""Run a compiled variant on the GPU: make inputs, launch, check against a reference, time.

Correctness comes first: C is filled with NaN before the checked launch, so an element the kernel
never writes fails the check; a kernel that fails is never timed. Timing follows Triton's do_bench:
CUDA events around each repetition, the L2 cache flushed before each one, warm-up first, the median.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .compile import Compiled, Resources
from .device import DeviceInfo, cuda, get_device
from .errors import GemmlabError
from .templates import Geometry, Variant

FP32_TOL = 1e-5         # relative Frobenius error; FP32 kernels land near 1e-7..1e-6
FLUSH_BYTES = 256 << 20  # larger than any L2 so far (H100: 50 MB), as in Triton's do_bench
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

    def bytes_needed(self, fp64_check: bool = False) -> int:
        """GPU memory for A, B, C, the reference, the check's two temporaries and the flush buffer
        (and float64 copies if asked)."""
        mk, kn, mn = self.M * self.K, self.K * self.N, self.M * self.N
        need = 4 * (mk + kn + 4 * mn) + FLUSH_BYTES
        return need + (8 * (mk + kn + mn) if fp64_check else 0)


@dataclass
class Check:
    rel_err: float
    max_abs_err: float
    tol: float
    reference: str
    unwritten: int = 0  # elements still NaN after the launch

    @property
    def passed(self) -> bool:
        return self.unwritten == 0 and math.isfinite(self.rel_err) and self.rel_err <= self.tol


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    reps: int


@dataclass
class Result:
    """One row: a variant (or cuBLAS) at one parameter set on one shape."""
    name: str
    params: dict
    shape: Shape
    check: Check | None = None
    timing: Timing | None = None
    resources: Resources | None = None
    geometry: Geometry | None = None
    blocks_per_sm: int | None = None
    compile_ms: float | None = None
    cached: bool | None = None
    source: str = ""
    user: bool = False
    error: str | None = None
    fault: str | None = None  # CRASHED or TIMEOUT: the kernel took its process down (error says how)

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


def bench(fn, min_reps: int = 10, min_time_ms: float = 100.0, max_reps: int = 1000,
          flush: bool = True, phase=None) -> Timing:
    """Median time of fn() in ms: events around each call, L2 flushed before each call. `phase(text,
    seconds)` is told how long the timed repetitions should take (a worker's time limit allows for it)."""
    cupy = cuda()
    buf = cupy.empty(FLUSH_BYTES, dtype=cupy.uint8) if flush else None

    def timed(n: int) -> list[float]:
        starts = [cupy.cuda.Event() for _ in range(n)]
        ends = [cupy.cuda.Event() for _ in range(n)]
        for s, e in zip(starts, ends):
            if buf is not None:
                buf.fill(0)  # evict A, B and C from L2: every repetition starts cold, as a real one would
            s.record()
            fn()
            e.record()
        ends[-1].synchronize()
        return [cupy.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends)]

    if phase:
        phase("warm up")
    first = timed(1)[0]  # warm-up, and an estimate of one call
    warm = min(max(1, math.ceil(25.0 / max(first, 1e-3))), 50)
    est = float(np.median(timed(warm)))
    reps = min(max(min_reps, math.ceil(min_time_ms / max(est, 1e-3))), max(max_reps, min_reps))
    if phase:
        phase(f"time {reps} repetitions", reps * est * 1e-3)
    times = timed(reps)
    return Timing(float(np.median(times)), float(min(times)), float(max(times)), reps)


class Problem:
    """Inputs for one shape: fresh random A and B, the output C, and the reference, on the GPU."""

    def __init__(self, shape: Shape, seed: int | None = None, fp64_check: bool = False):
        self.cupy = cupy = cuda()
        self.device: DeviceInfo = get_device()
        self.shape = shape
        self.seed = seed if seed is not None else int.from_bytes(np.random.bytes(4), "little")
        free, _total = cupy.cuda.runtime.memGetInfo()
        need = shape.bytes_needed(fp64_check)
        if need > free:
            raise GemmlabError(f"shape {shape} needs {need / 2**30:.1f} GiB of GPU memory and "
                               f"{self.device.name} has {free / 2**30:.1f} GiB free",
                               hint="choose a smaller --size or -M/-N/-K")
        try:
            rng = cupy.random.default_rng(self.seed)
            self.A = rng.standard_normal((shape.M, shape.K), dtype=cupy.float32)
            self.B = rng.standard_normal((shape.K, shape.N), dtype=cupy.float32)
            self.C = cupy.empty((shape.M, shape.N), dtype=cupy.float32)
            if fp64_check:
                self.ref = cupy.matmul(self.A.astype(cupy.float64), self.B.astype(cupy.float64))
                self.ref_name = "float64"
            else:
                self.ref = cupy.matmul(self.A, self.B)
                self.ref_name = "cupy.matmul"
            cupy.cuda.Device().synchronize()
        except cupy.cuda.memory.OutOfMemoryError:
            raise GemmlabError(f"out of GPU memory allocating the inputs of shape {shape}") from None
        self.ref_norm = float(cupy.linalg.norm(self.ref))

    def check(self) -> Check:
        cupy = self.cupy
        unwritten = int(cupy.isnan(self.C).sum())
        diff = self.C.astype(self.ref.dtype) - self.ref
        rel = float(cupy.linalg.norm(diff)) / (self.ref_norm or 1.0)
        return Check(rel, float(cupy.abs(diff).max()), FP32_TOL, self.ref_name, unwritten)

    def workspace(self, nbytes: int):
        """Scratch memory for kernels that declare it: allocated once per Problem, grown when needed."""
        if getattr(self, "_workspace", None) is None or self._workspace.nbytes < nbytes:
            self._workspace = None
            try:
                self._workspace = self.cupy.empty(nbytes, dtype=self.cupy.uint8)
            except self.cupy.cuda.memory.OutOfMemoryError:
                raise GemmlabError(f"out of GPU memory allocating a {nbytes / 2**20:.0f} MiB workspace",
                                   hint="a smaller split or shape needs less") from None
        return self._workspace

    def cublas(self, min_reps: int = 10) -> Result:
        """cuBLAS through cupy.matmul on the same inputs: the yardstick."""
        cupy = self.cupy
        r = Result("cuBLAS", {}, self.shape, source="cupy.matmul")
        self.C.fill(math.nan)
        cupy.matmul(self.A, self.B, out=self.C)
        r.check = self.check()
        r.timing = bench(lambda: cupy.matmul(self.A, self.B, out=self.C), min_reps=min_reps)
        return r

    def run(self, variant: Variant, params: dict, compiled: Compiled, min_reps: int = 10,
            timed: bool = True, phase=None) -> Result:
        """Launch once on NaN-poisoned C and check; then, if it passed (and `timed`), time it.
        A CUDA error in a launch marks the result CRASHED: this process's CUDA context is then
        unusable (gemmlab's CLI runs this in a worker process for that reason)."""
        from .compile import load
        cupy, s = self.cupy, self.shape
        r = Result(variant.name, dict(params), s, resources=compiled.resources,
                   compile_ms=compiled.compile_ms if not compiled.cached else compiled.lookup_ms,
                   cached=compiled.cached, source=str(variant.path), user=not variant.builtin)
        geo = r.geometry = variant.geometry(params, s.M, s.N, s.K)
        limit = self.device.smem_optin
        if compiled.resources.smem + geo.smem > limit:
            raise GemmlabError(
                f"variant '{variant.name}' needs {compiled.resources.smem + geo.smem} bytes of shared "
                f"memory per block; {self.device.name} allows at most {limit}")
        t0 = time.perf_counter()
        kernel = load(compiled)
        if not compiled.cached:
            r.compile_ms = compiled.lookup_ms + (time.perf_counter() - t0) * 1e3
        if geo.smem > 48 * 1024:
            kernel.max_dynamic_shared_size_bytes = geo.smem  # opt in above the default 48 KB
        dims = (np.int32(s.M), np.int32(s.N), np.int32(s.K))
        args = (self.A, self.B, self.C) + dims
        if geo.workspace:
            args += (self.workspace(geo.workspace),)
        reduce = load(compiled, "reduce") if geo.reduce_grid else None

        def launch():
            if geo.zero_output:  # the kernel adds into C: part of its work, so inside the timing
                self.C.fill(0)
            kernel(geo.grid, geo.block, args, shared_mem=geo.smem)
            if reduce is not None:  # e.g. split-K: sum the partial products from the workspace into C
                reduce(geo.reduce_grid, geo.reduce_block, (args[-1], self.C) + dims)

        try:
            r.blocks_per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                kernel.kernel.ptr, geo.threads, geo.smem)
        except Exception:
            r.blocks_per_sm = None
        self.C.fill(math.nan)
        cuda_errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
        try:
            if phase:
                phase(f"check {variant.name}")
            launch()
            cupy.cuda.Device().synchronize()
            r.check = self.check()
            if r.check.passed and timed:
                r.timing = bench(launch, min_reps=min_reps, phase=phase)
        except cuda_errors as e:
            r.check = r.timing = None
            r.fault, r.error = "CRASHED", f"the kernel failed: {e}"
        return r
