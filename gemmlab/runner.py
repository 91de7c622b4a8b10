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
# Tolerance by input type. TF32 keeps 10 of FP32's 23 mantissa bits: rounding both inputs of every
# product gives errors near 5e-4 (8e-4 when the hardware truncates). FP16/BF16 inputs are rounded once,
# when they are made, and the reference uses the same rounded values, so only the order of the FP32
# sums differs; the looser bound is the conventional one for these types.
TOLERANCES = {"fp32": FP32_TOL, "tf32": 2e-3, "fp16": 1e-2, "bf16": 1e-2}
# A variant with an EPILOGUE parameter takes (float alpha, float beta, const float* bias) after K:
# C = alpha * A@B + beta * C (alpha_beta), C = max(A@B + bias[col], 0) (bias_relu), or plain A@B (none).
ALPHA, BETA = 1.5, -0.75  # neither 0 nor 1, so that a kernel that ignores one of them fails the check
ITEM_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
CUBLAS_SOURCE = {"fp32": "cupy.matmul", "tf32": "cublasGemmEx TF32", "fp16": "cublasGemmEx FP16",
                 "bf16": "cublasGemmEx BF16"}
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)  # alpha and beta for cuBLAS (host pointers)
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

    def bytes_needed(self, fp64_check: bool = False, dtype: str = "fp32") -> int:
        """GPU memory for A, B (in their type), C, the reference, the check's two temporaries and the
        flush buffer; FP32 copies of 16-bit inputs for the reference; float64 copies if asked."""
        mk, kn, mn = self.M * self.K, self.K * self.N, self.M * self.N
        item = ITEM_BYTES[dtype]
        need = item * (mk + kn) + 4 * 4 * mn + FLUSH_BYTES + (4 * (mk + kn) if item < 4 else 0)
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
    rounds: list[float] | None = None  # each round's median, where the time is the median of several rounds


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
    dtype: str = "fp32"
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


def to_bf16(x):
    """float32 array -> bfloat16 bits (uint16; cupy has no bfloat16 type), rounded to nearest even."""
    cupy = cuda()
    u = x.view(cupy.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(cupy.uint16)


def from_bf16(b):
    """bfloat16 bits -> float32, exactly."""
    cupy = cuda()
    return (b.astype(cupy.uint32) << 16).view(cupy.float32)


def cublas_gemm(A, B, C, dtype: str) -> None:
    """C (float32, M x N) = A @ B with cuBLAS, inputs of type `dtype`, FP32 accumulation: cublasGemmEx,
    since cupy.matmul has no bfloat16 and returns 16-bit C for 16-bit inputs. Row-major C = A B is
    column-major C^T = B^T A^T, so B goes first."""
    cupy = cuda()
    cublas, rt = cupy.cuda.cublas, cupy.cuda.runtime
    types = {"tf32": rt.CUDA_R_32F, "fp16": rt.CUDA_R_16F, "bf16": rt.CUDA_R_16BF}
    compute = cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if dtype == "tf32" else cublas.CUBLAS_COMPUTE_32F
    (M, K), N = A.shape, B.shape[1]
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, N, M, K, _ONE.ctypes.data,
                  B.data.ptr, types[dtype], N, A.data.ptr, types[dtype], K, _ZERO.ctypes.data,
                  C.data.ptr, rt.CUDA_R_32F, N, compute, cublas.CUBLAS_GEMM_DEFAULT)


def _driver():
    try:
        from cuda.bindings import driver as drv
    except ImportError:
        raise GemmlabError("TMA and cluster variants need cuda-bindings (tensor maps, cluster occupancy)",
                           hint="pip install cuda-bindings") from None
    return drv


def resident_blocks(kernel, geo, sms: int) -> int:
    """How many blocks of `kernel`, launched as `geo` says, the GPU holds at once. A kernel compiled with
    __cluster_dims__ is placed a cluster at a time, on the SMs of one GPC, so whole clusters count
    (cuOccupancyMaxActiveClusters: on the H100 66 of 2-block clusters, 30 of 4-block ones, not 33);
    other kernels, blocks per SM times SMs."""
    drv = _driver()
    func = drv.CUfunction(kernel.kernel.ptr)
    err, width = drv.cuFuncGetAttribute(drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, func)
    if err != drv.CUresult.CUDA_SUCCESS or width <= 1:
        per_sm = cuda().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, geo.threads, geo.smem)
        return per_sm * sms
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = width, 1, 1
    config = drv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = geo.grid
    config.blockDimX, config.blockDimY, config.blockDimZ = geo.block
    config.sharedMemBytes, config.numAttrs, config.attrs = geo.smem, 1, [attr]
    err, clusters = drv.cuOccupancyMaxActiveClusters(func, config)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise GemmlabError(f"the driver could not say how many {width}-block clusters fit: {err.name}")
    return clusters * width


def tensor_map(array, box: tuple[int, ...], dtype: str):
    """A TMA tensor map over a row-major matrix, for `cp.async.bulk.tensor`: `box` elements of it per
    copy (contiguous dimension first), 128-byte swizzled in shared memory, zeros outside the matrix.
    Returned as 128 raw bytes, which cupy passes by value to a `const __grid_constant__` parameter."""
    import ctypes
    drv = _driver()
    kinds = {"bf16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             "fp16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             # tf32: FP32 in memory, which the copy engine rounds to TF32 (to nearest, as cuBLAS's kernel
             # has it) on the way into shared memory, so that the tensor cores read rounded operands and the
             # zeroed low bits stop toggling (H100: 1.62 -> 1.65 GHz under the power cap, 3% faster;
             # benchmarks/h100-power-experiments.txt, run 26)
             "tf32": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32}
    if dtype not in kinds:
        raise GemmlabError(f"gemmlab makes TMA tensor maps for {', '.join(kinds)}, not {dtype}")
    rows, cols = array.shape
    err, tmap = drv.cuTensorMapEncodeTiled(
        kinds[dtype], 2, array.data.ptr, [drv.cuuint64_t(cols), drv.cuuint64_t(rows)],
        [drv.cuuint64_t(cols * array.itemsize)], [drv.cuuint32_t(b) for b in box], [drv.cuuint32_t(1)] * 2,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise GemmlabError(f"cuTensorMapEncodeTiled refused a {rows} x {cols} {dtype} matrix with box "
                           f"{tuple(box)}: {err.name}",
                           hint="the box must be at most 256 per dimension and its contiguous side at most "
                                "128 bytes (the swizzle span); rows must be 16-byte aligned")
    return np.frombuffer(ctypes.string_at(tmap.getPtr(), 128), dtype=np.dtype((np.void, 128)))[0]


class Problem:
    """Inputs for one shape and input type: fresh random A and B, the output C, and the reference, on
    the GPU. A and B are float32 for fp32 and tf32, float16 for fp16, bfloat16 bits (uint16) for bf16;
    C is float32 for every type (FP32 accumulation)."""

    def __init__(self, shape: Shape, seed: int | None = None, fp64_check: bool = False, dtype: str = "fp32"):
        self.cupy = cupy = cuda()
        self.device: DeviceInfo = get_device()
        self.shape = shape
        self.dtype = dtype
        self.seed = seed if seed is not None else int.from_bytes(np.random.bytes(4), "little")
        free, _total = cupy.cuda.runtime.memGetInfo()
        need = shape.bytes_needed(fp64_check, dtype)
        if need > free:
            raise GemmlabError(f"shape {shape} needs {need / 2**30:.1f} GiB of GPU memory and "
                               f"{self.device.name} has {free / 2**30:.1f} GiB free",
                               hint="choose a smaller --size or -M/-N/-K")
        try:
            rng = cupy.random.default_rng(self.seed)
            A = rng.standard_normal((shape.M, shape.K), dtype=cupy.float32)
            B = rng.standard_normal((shape.K, shape.N), dtype=cupy.float32)
            if dtype == "fp16":
                self.A, self.B = A.astype(cupy.float16), B.astype(cupy.float16)
                A, B = self.A.astype(cupy.float32), self.B.astype(cupy.float32)  # exactly the rounded inputs
            elif dtype == "bf16":
                self.A, self.B = to_bf16(A), to_bf16(B)
                A, B = from_bf16(self.A), from_bf16(self.B)
            else:
                self.A, self.B = A, B
            self.C = cupy.empty((shape.M, shape.N), dtype=cupy.float32)
            # The reference multiplies the very inputs the kernel gets, in FP32 (or float64): for
            # tf32 that is the exact product the tensor cores approximate.
            if fp64_check:
                self.ref = cupy.matmul(A.astype(cupy.float64), B.astype(cupy.float64))
                self.ref_name = "float64"
            else:
                self.ref = cupy.matmul(A, B)
                self.ref_name = "cupy.matmul" if dtype == "fp32" else f"cupy.matmul fp32 of the {dtype} inputs"
            del A, B
            cupy.cuda.Device().synchronize()
        except cupy.cuda.memory.OutOfMemoryError:
            raise GemmlabError(f"out of GPU memory allocating the inputs of shape {shape}") from None
        self.ref_norm = float(cupy.linalg.norm(self.ref))

    def check(self, ref=None) -> Check:
        """C against the reference (or `ref`, the reference after an epilogue)."""
        cupy = self.cupy
        unwritten = int(cupy.isnan(self.C).sum())
        ref = self.ref if ref is None else ref
        diff = self.C.astype(ref.dtype) - ref
        norm = self.ref_norm if ref is self.ref else float(cupy.linalg.norm(ref))
        rel = float(cupy.linalg.norm(diff)) / (norm or 1.0)
        return Check(rel, float(cupy.abs(diff).max()), TOLERANCES[self.dtype], self.ref_name, unwritten)

    def bias(self):
        """A bias per column of C, for the bias_relu epilogue."""
        if getattr(self, "_bias", None) is None:
            self._bias = self.cupy.random.default_rng(self.seed + 1).standard_normal(self.shape.N, dtype=self.cupy.float32)
        return self._bias

    def epilogue_reference(self, epilogue: str):
        """The reference after a fused epilogue: alpha*AB + beta*C0 (C0 random), or relu(AB + bias).
        These are two more arrays the size of C, beyond what `Shape.bytes_needed` counted."""
        cupy = self.cupy
        try:
            if epilogue == "alpha_beta":
                self.C0 = cupy.random.default_rng(self.seed + 2).standard_normal(self.C.shape, dtype=cupy.float32)
                return ALPHA * self.ref + BETA * self.C0.astype(self.ref.dtype)
            if epilogue == "bias_relu":
                return cupy.maximum(self.ref + self.bias().astype(self.ref.dtype), 0)
        except cupy.cuda.memory.OutOfMemoryError:
            self.C0 = None  # free it if the reference after it was what did not fit
            raise GemmlabError(f"out of GPU memory checking the {epilogue} epilogue on shape {self.shape}: it needs "
                               f"two more arrays the size of C ({2 * self.C.nbytes / 2**30:.1f} GiB)",
                               hint="choose a smaller shape, or EPILOGUE=none") from None
        if epilogue == "none":
            return None
        raise GemmlabError(f"unknown EPILOGUE {epilogue!r}: gemmlab knows none, alpha_beta and bias_relu")

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

    def gpc_order(self, kernel, geo):
        """The table of a GPC order (gemmlab/gpc.py), for a grid of one block on every SM, all running at
        once; for other grids an empty table, which the kernel takes for its natural order."""
        from .gpc import gpc_map, order_argument, slot_table
        cluster, group = geo.gpc_order
        sms, blocks = self.device.sms, geo.grid[0] * geo.grid[1] * geo.grid[2]
        cupy = self.cupy
        full = (blocks == sms and cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, geo.threads, geo.smem) == 1 and resident_blocks(kernel, geo, sms) >= blocks)
        return order_argument(slot_table(gpc_map(sms), sms, cluster, group) if full else None)

    def cublas(self, min_reps: int = 10) -> Result:
        """cuBLAS on the same inputs, the yardstick: cupy.matmul for fp32, cublasGemmEx for the others."""
        cupy = self.cupy
        if self.dtype == "fp32":
            def gemm():
                cupy.matmul(self.A, self.B, out=self.C)
        else:
            def gemm():
                cublas_gemm(self.A, self.B, self.C, self.dtype)
        r = Result("cuBLAS", {}, self.shape, source=CUBLAS_SOURCE[self.dtype], dtype=self.dtype)
        self.C.fill(math.nan)
        gemm()
        r.check = self.check()
        r.timing = bench(gemm, min_reps=min_reps)
        return r

    def run(self, variant: Variant, params: dict, compiled: Compiled, min_reps: int = 10,
            timed: bool = True, phase=None) -> Result:
        """Launch once on NaN-poisoned C and check; then, if it passed (and `timed`), time it.
        A CUDA error in a launch marks the result CRASHED: this process's CUDA context is then
        unusable (gemmlab's CLI runs this in a worker process for that reason)."""
        from .compile import load
        cupy, s = self.cupy, self.shape
        if variant.dtype(params) != self.dtype:
            raise GemmlabError(f"variant '{variant.name}' with DTYPE={variant.dtype(params)} cannot run on "
                               f"{self.dtype} inputs")
        r = Result(variant.name, dict(params), s, resources=compiled.resources,
                   compile_ms=compiled.compile_ms if not compiled.cached else compiled.lookup_ms,
                   cached=compiled.cached, source=str(variant.path), user=not variant.builtin,
                   dtype=self.dtype)
        geo = r.geometry = variant.geometry(params, s.M, s.N, s.K, self.device.sms)
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
        if geo.resident:  # its blocks wait for each other: a block that is not running yet would hang them
            blocks, fits = geo.grid[0] * geo.grid[1] * geo.grid[2], resident_blocks(kernel, geo, self.device.sms)
            if fits < blocks:
                raise GemmlabError(
                    f"variant '{variant.name}' needs all {blocks} blocks of its grid running at once (its blocks "
                    f"wait for each other: launch.resident is {variant.resident}), and {self.device.name} holds {fits}",
                    hint=f"choose parameters that make {variant.resident} false")
        dims = (np.int32(s.M), np.int32(s.N), np.int32(s.K))
        args = (self.A, self.B, self.C) + dims
        if geo.workspace:
            args += (self.workspace(geo.workspace),)
        for op, box in geo.tma:  # tensor maps the kernel's TMA copies read A and B through
            args += (tensor_map(self.A if op == "A" else self.B, box, self.dtype),)
        if geo.gpc_order:  # clusters of one GPC on tiles that share A's rows: only where the grid fills every SM
            args += (self.gpc_order(kernel, geo),)
        epilogue, ref = params.get("EPILOGUE"), None
        if epilogue is not None:  # the fused epilogue's inputs, and what C must then be
            args += (np.float32(ALPHA), np.float32(BETA), self.bias())
            ref = self.epilogue_reference(epilogue)
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

        def checked_launch():
            self.C.fill(math.nan)  # poison: elements the kernel does not write stay NaN and fail
            if epilogue == "alpha_beta":
                self.C[...] = self.C0  # beta * C reads C: it must hold numbers (the reference knows which)
            launch()
            cupy.cuda.Device().synchronize()
            return self.check(ref)

        cuda_errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
        try:
            if phase:
                phase(f"check {variant.name}")
            r.check = checked_launch()
            if r.check.passed and timed:
                r.timing = bench(launch, min_reps=min_reps, phase=phase)
                # Checked again after the timed launches: a kernel that keeps state from one launch to
                # the next (split K's counters, kernels/split.j2; stream-K's flags, kernels/stream_k.j2) must
                # be right on the last one too.
                again = checked_launch()
                if not again.passed:
                    r.check, r.timing = again, None
        except cuda_errors as e:
            r.check = r.timing = None
            r.fault, r.error = "CRASHED", f"the kernel failed: {e}"
        return r
