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

from . import check as checking
from .check import ALPHA, BETA, Check
from .clocks import ClockWatch
from .compile import Compiled, Resources
from .device import DeviceInfo, cuda, get_device
from .errors import GemmlabError
from .templates import Geometry, Variant

# A variant with an EPILOGUE parameter takes (float alpha, float beta, const float* bias) after K:
# C = alpha * A@B + beta * C (alpha_beta), C = max(A@B + bias[col], 0) (bias_relu), or plain A@B (none).
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
    with ClockWatch() as clocks:
        times = timed(reps)
    return Timing(float(np.median(times)), float(min(times)), float(max(times)), reps, samples=times,
                  clocks=clocks.summary())


def to_bf16(x):
    """float32 array -> bfloat16 bits (uint16; cupy has no bfloat16 type), rounded to nearest even.
    (numpy's types name the views, so it works on numpy arrays too.)"""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(b):
    """bfloat16 bits -> float32, exactly."""
    return (b.astype(np.uint32) << 16).view(np.float32)


def synchronize(xp) -> None:
    """Wait for the GPU (nothing to wait for where numpy stands in for cupy, in the CPU tests)."""
    if hasattr(xp, "cuda"):
        xp.cuda.Device().synchronize()


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


@dataclass(frozen=True)
class InputSet:
    """A kind of inputs every kernel is checked on. `scale` None: small integers, where every product
    and partial sum is exact in FP32, so C must equal the reference bit for bit."""
    name: str
    scale: float | None
    seed_offset: int


# The first set is the one timed; the others are checked too, before timing, so that a kernel right only
# on one set of values (by accident, or at one magnitude) is caught.
INPUT_SETS = (InputSet("random", 1.0, 0), InputSet("random x1000", 1000.0, 7919),
              InputSet("small integers", None, 104729))


def c_tile(params: dict) -> tuple[int, int]:
    """The rows x columns of C one block computes, from the parameters that name them (BM x BN, TILE,
    BLOCK, COLS), for saying which tiles hold wrong elements; 32 where no parameter says."""
    def first(*names):
        return next((int(params[n]) for n in names if isinstance(params.get(n), int)), 32)
    return first("BM", "TILE", "BLOCK"), first("BN", "COLS", "TILE", "BLOCK")


class Inputs:
    """One set of inputs on the GPU, in the kernels' type, with pristine copies to guard them, and what C
    must be: the reference and each element's bound (gemmlab/check.py)."""

    def __init__(self, xp, shape: Shape, dtype: str, seed: int, kind: InputSet, fp64: bool):
        """`xp`: cupy, or numpy in the CPU tests."""
        M, N, K = shape.M, shape.N, shape.K
        # Integers in [-4, 4]: every partial sum (and alpha_beta's 1.5x of it) fits FP32's 24 bits while
        # 24 K < 2^22, so C is exact in any order; past that K the bound applies to them as to the others.
        self.kind, self.exact = kind, kind.scale is None and 24 * K < 2**22
        rng = xp.random.default_rng(seed + kind.seed_offset)

        def make(*dims):
            if kind.scale is None:
                return rng.integers(-4, 5, dims).astype(xp.float32)
            return rng.standard_normal(dims, dtype=xp.float32) * xp.float32(kind.scale)

        A, B = make(M, K), make(K, N)
        if dtype == "fp16":
            self.A, self.B = A.astype(xp.float16), B.astype(xp.float16)
            A, B = self.A.astype(xp.float32), self.B.astype(xp.float32)  # exactly the rounded inputs
        elif dtype == "bf16":
            self.A, self.B = to_bf16(A), to_bf16(B)
            A, B = from_bf16(self.A), from_bf16(self.B)
        else:
            self.A, self.B = A, B
        self.bias, self._C0, self._make = make(N), None, make
        # The reference multiplies the very inputs the kernel gets, in FP32 (or float64): for tf32 that
        # is the exact product the tensor cores approximate.
        rt = xp.float64 if fp64 else xp.float32
        self.ref = xp.matmul(A.astype(rt), B.astype(rt))
        l2 = None if self.exact else xp.sqrt(xp.matmul(A * A, B * B))
        self.bound = checking.bound(xp, self.ref, l2, K, dtype, self.exact)
        del A, B, l2
        self.pristine = {"A": self.A.copy(), "B": self.B.copy(), "bias": self.bias.copy()}

    @property
    def C0(self):
        """The C that alpha_beta's beta * C reads: made when first needed (it is the size of C)."""
        if self._C0 is None:
            self._C0 = self._make(*self.ref.shape)
            self.pristine["C0"] = self._C0.copy()
        return self._C0

    def guard(self, xp) -> list[str]:
        """The inputs a launch wrote into (and puts them back, so that no later verdict depends on it)."""
        found = []
        for name, clean in self.pristine.items():
            now = getattr(self, name if name != "C0" else "_C0")
            what = checking.changed(xp, name, now, clean)
            if what:
                found.append(what)
                now[...] = clean
        return found


class Problem:
    """Inputs for one shape and input type, on the GPU: fresh random A and B (the timed set, INPUT_SETS[0]),
    the output C, and the other input sets, made when a kernel is checked. A and B are float32 for fp32
    and tf32, float16 for fp16, bfloat16 bits (uint16) for bf16; C is float32 for every type (FP32
    accumulation)."""

    def __init__(self, shape: Shape, seed: int | None = None, fp64_check: bool = False, dtype: str = "fp32",
                 xp=None):
        """`xp`: the array module, cupy unless a CPU test gives numpy (then there is no device, and only
        `verify` and the input sets work: launches are whatever the test emulates)."""
        self.cupy = cupy = xp or cuda()
        self.device: DeviceInfo | None = get_device() if xp is None else None
        self.shape = shape
        self.dtype = dtype
        self.fp64 = fp64_check
        self.seed = seed if seed is not None else int.from_bytes(np.random.bytes(4), "little")
        if self.device is not None:
            free, _total = cupy.cuda.runtime.memGetInfo()
            need = shape.bytes_needed(fp64_check, dtype)
            if need > free:
                raise GemmlabError(f"shape {shape} needs {need / 2**30:.1f} GiB of GPU memory and "
                                   f"{self.device.name} has {free / 2**30:.1f} GiB free",
                                   hint="choose a smaller --size or -M/-N/-K")
        self.ref_name = "float64" if fp64_check else ("cupy.matmul" if dtype == "fp32"
                                                      else f"cupy.matmul fp32 of the {dtype} inputs")
        self.main = self._inputs(INPUT_SETS[0])
        self.C = cupy.empty((shape.M, shape.N), dtype=cupy.float32)
        synchronize(cupy)
        self.A, self.B, self.ref = self.main.A, self.main.B, self.main.ref

    def _inputs(self, kind: InputSet) -> Inputs:
        try:
            return Inputs(self.cupy, self.shape, self.dtype, self.seed, kind, self.fp64)
        except MemoryError:  # cupy's OutOfMemoryError is one
            raise GemmlabError(f"out of GPU memory making the {kind.name} inputs of shape {self.shape}",
                               hint="choose a smaller --size or -M/-N/-K") from None

    def input_sets(self):
        """Every set of inputs, the timed one first; the others are made one at a time and dropped after."""
        yield self.main
        for kind in INPUT_SETS[1:]:
            yield self._inputs(kind)

    def verify(self, launch_on, tile: tuple[int, int] = (32, 32), epilogue: str | None = None,
               sets=None) -> Check:
        """Run `launch_on(inputs)()` on NaN-poisoned C for each input set (all of them unless `sets` says),
        and judge every element; stop at the first set that fails. The verdict of the timed set, unless
        another failed. Inputs a launch wrote into are named in the verdict, and restored."""
        cupy, kind = self.cupy, epilogue or "none"
        verdict = None
        try:
            verdict = self._verify(launch_on, tile, kind, sets or self.input_sets())
        except MemoryError:  # cupy's OutOfMemoryError is one
            raise GemmlabError(f"out of GPU memory checking on shape {self.shape}: the check needs a few more "
                               f"arrays the size of C ({self.C.nbytes / 2**30:.1f} GiB each)",
                               hint="choose a smaller shape") from None
        return verdict

    def _verify(self, launch_on, tile, kind, sets) -> Check:
        cupy, verdict = self.cupy, None
        for inputs in sets:
            self.C.fill(math.nan)  # poison: elements the kernel does not write stay NaN and fail
            if kind == "alpha_beta":
                self.C[...] = inputs.C0  # beta * C reads C: it must hold numbers (the reference knows which)
            launch_on(inputs)()
            synchronize(cupy)
            try:
                ref, bnd = checking.epilogue(cupy, kind, inputs.ref, inputs.bound,
                                             inputs.C0 if kind == "alpha_beta" else None, inputs.bias)
            except ValueError as e:
                raise GemmlabError(str(e)) from None
            c = checking.verdict(cupy, self.C, ref, bnd, self.ref_name, tile, inputs.kind.name)
            del ref, bnd
            c.clobbered = inputs.guard(cupy)
            if verdict is None or not c.passed:
                verdict = c
            if not c.passed:
                break
        return verdict

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

    def _timed(self, r: Result, launch, tile, epilogue, min_reps: int, phase) -> None:
        """Time `launch` on the timed inputs, then check them again: a kernel that keeps state from one
        launch to the next (split K's counters, kernels/split.j2; stream-K's flags, kernels/stream_k.j2)
        must be right on the last one too, and one that wrote into its inputs while timed is caught."""
        r.timing = bench(launch, min_reps=min_reps, phase=phase)
        clobbered = self.main.guard(self.cupy)
        again = self.verify(lambda inputs: launch, tile, epilogue, sets=[self.main])
        again.clobbered = clobbered + again.clobbered
        if not again.passed:
            r.check, r.timing = again, None

    def cublas(self, min_reps: int = 10) -> Result:
        """cuBLAS on the same inputs, the yardstick: cupy.matmul for fp32, cublasGemmEx for the others."""
        cupy = self.cupy

        def on(inputs):
            if self.dtype == "fp32":
                return lambda: cupy.matmul(inputs.A, inputs.B, out=self.C)
            return lambda: cublas_gemm(inputs.A, inputs.B, self.C, self.dtype)
        r = Result("cuBLAS", {}, self.shape, source=CUBLAS_SOURCE[self.dtype], dtype=self.dtype)
        r.check = self.verify(on)
        if r.check.passed:
            self._timed(r, on(self.main), (32, 32), None, min_reps, None)
        return r

    def run(self, variant: Variant, params: dict, compiled: Compiled, min_reps: int = 10,
            timed: bool = True, phase=None) -> Result:
        """Launch on NaN-poisoned C and check, on every input set; then, if it passed (and `timed`), time
        it on the first. A CUDA error in a launch marks the result CRASHED: this process's CUDA context is
        then unusable (gemmlab's CLI runs this in a worker process for that reason)."""
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
        epilogue = params.get("EPILOGUE")
        if epilogue is not None and epilogue not in checking.EPILOGUES:
            raise GemmlabError(f"unknown EPILOGUE {epilogue!r}: gemmlab knows {', '.join(checking.EPILOGUES)}")
        order = self.gpc_order(kernel, geo) if geo.gpc_order else None
        reduce = load(compiled, "reduce") if geo.reduce_grid else None
        workspace = self.workspace(geo.workspace) if geo.workspace else None

        def on(inputs):
            """The launch on one set of inputs: the kernel's arguments, in the order templates declare."""
            args = (inputs.A, inputs.B, self.C) + dims
            if workspace is not None:
                args += (workspace,)
            for op, box in geo.tma:  # tensor maps the kernel's TMA copies read A and B through
                args += (tensor_map(inputs.A if op == "A" else inputs.B, box, self.dtype),)
            if order is not None:  # clusters of one GPC on tiles that share A's rows: only where the grid fills every SM
                args += (order,)
            if epilogue is not None:  # the fused epilogue's inputs
                args += (np.float32(ALPHA), np.float32(BETA), inputs.bias)

            def launch():
                if geo.zero_output:  # the kernel adds into C: part of its work, so inside the timing
                    self.C.fill(0)
                kernel(geo.grid, geo.block, args, shared_mem=geo.smem)
                if reduce is not None:  # e.g. split-K: sum the partial products from the workspace into C
                    reduce(geo.reduce_grid, geo.reduce_block, (workspace, self.C) + dims)
            return launch

        try:
            r.blocks_per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                kernel.kernel.ptr, geo.threads, geo.smem)
        except Exception:
            r.blocks_per_sm = None

        tile = c_tile(params)
        cuda_errors = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)
        try:
            if phase:
                phase(f"check {variant.name}")
            r.check = self.verify(on, tile, epilogue)
            if r.check.passed and timed:
                self._timed(r, on(self.main), tile, epilogue, min_reps, phase)
        except cuda_errors as e:
            r.check = r.timing = None
            r.fault, r.error = "CRASHED", f"the kernel failed: {e}"
        return r
