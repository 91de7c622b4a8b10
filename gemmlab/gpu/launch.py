"""A configured kernel's launch on given A, B and C, and what it needs from the driver: how many blocks
fit at once, TMA tensor maps, the GPC order's table, and cuBLAS.

    prepared = prepare(kernel, M, N, K, device)      # plan, loaded function, limits checked, workspace
    launch = prepared.bind(A, B, C)                  # the arguments the template lists, made once
    launch()                                         # on the current stream (`with stream: launch()`)

gemmlab/gpu/problem.py launches through it on one GPU, gemmlab/multigpu/ on each rank's blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import GemmlabError
from ..compile import ENTRY
from ..results.check import ALPHA, BETA
from .driver import bindings, cuda

CUBLAS_SOURCE = {"fp32": "cupy.matmul", "tf32": "cublasGemmEx TF32", "fp16": "cublasGemmEx FP16",
                 "bf16": "cublasGemmEx BF16",
                 # cublasGemmEx has no FP8: cuBLASLt's, through torch (gemmlab/gpu/fp8_refs.py)
                 "e4m3": "torch._scaled_mm E4M3 (cuBLASLt), per-tensor scales",
                 "e5m2": "torch._scaled_mm E5M2 (cuBLASLt), per-tensor scales"}
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)  # alpha and beta for cuBLAS (host pointers)


def cublas_gemm(A, B, C, dtype: str, out_dtype: str = "fp32") -> None:
    """C (M x N, of type `out_dtype`: float32, or 16 bits) = A @ B with cuBLAS, inputs of type `dtype`,
    FP32 accumulation: cublasGemmEx, since cupy.matmul has no bfloat16 and returns 16-bit C for 16-bit
    inputs. Row-major C = A B is column-major C^T = B^T A^T, so B goes first."""
    cupy = cuda()
    cublas, rt = cupy.cuda.cublas, cupy.cuda.runtime
    types = {"tf32": rt.CUDA_R_32F, "fp16": rt.CUDA_R_16F, "bf16": rt.CUDA_R_16BF}
    compute = cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if dtype == "tf32" else cublas.CUBLAS_COMPUTE_32F
    (M, K), N = A.shape, B.shape[1]
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)  # the caller's stream (`with stream:`)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, N, M, K, _ONE.ctypes.data,
                  B.data.ptr, types[dtype], N, A.data.ptr, types[dtype], K, _ZERO.ctypes.data,
                  C.data.ptr, types.get(out_dtype, rt.CUDA_R_32F), N, compute, cublas.CUBLAS_GEMM_DEFAULT)


def resident_blocks(kernel, geo, sms: int) -> int:
    """How many blocks of `kernel`, launched as `geo` says, the GPU holds at once. A kernel compiled with
    __cluster_dims__ is placed a cluster at a time, on the SMs of one GPC, so whole clusters count
    (cuOccupancyMaxActiveClusters: on the H100 66 of 2-block clusters, 30 of 4-block ones, not 33);
    other kernels, blocks per SM times SMs."""
    drv = bindings()
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
    """A TMA tensor map over a row-major matrix (rows may be further apart than their length: a view of a
    wider buffer), for `cp.async.bulk.tensor`: `box` elements of it per copy (contiguous dimension first),
    128-byte swizzled in shared memory, zeros outside the matrix. Returned as 128 raw bytes, which cupy
    passes by value to a `const __grid_constant__` parameter."""
    import ctypes
    drv = bindings()
    kinds = {"bf16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             "fp16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             # tf32: FP32 in memory, which the copy engine rounds to TF32 (to nearest, as cuBLAS's kernel
             # has it) on the way into shared memory, so that the tensor cores read rounded operands and the
             # zeroed low bits stop toggling (H100: 1.62 -> 1.65 GHz under the power cap, 3% faster;
             # docs/journal.md, "TF32: wgmma_tf32")
             "tf32": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
             # FP8: bytes to the copy engine
             "e4m3": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8,
             "e5m2": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8,
             # C, for TMA stores (a bf16 C is bf16 above): the copy engine converts nothing on a store
             "fp32": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}
    if dtype not in kinds:
        raise GemmlabError(f"gemmlab makes TMA tensor maps for {', '.join(kinds)}, not {dtype}")
    rows, cols = array.shape
    err, tmap = drv.cuTensorMapEncodeTiled(
        kinds[dtype], 2, array.data.ptr, [drv.cuuint64_t(cols), drv.cuuint64_t(rows)],
        [drv.cuuint64_t(array.strides[0])], [drv.cuuint32_t(b) for b in box], [drv.cuuint32_t(1)] * 2,
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


_loaded: dict[str, object] = {}  # key -> cupy.RawModule


TMA_PITCH = 16  # bytes: TMA reads rows that start this aligned


# The copy of tma_ready: rows of `length` bytes, back to back in `src` (16-byte aligned), into rows `pitch`
# bytes apart in `dst` (a multiple of 16), one 16-byte store a thread. A chunk of a source row starts at
# any byte, so it is cut out of the two aligned 16-byte words that hold it (shifted by whole words, then
# by the bytes left with funnel shifts); neighbouring threads read the same words, from L1. cupy's
# `padded[...] = array` (an elementwise kernel over a strided view, 2 bytes at a time) moved 0.6-0.8 TB/s
# counting bytes read and written; this 1.9-2.75 TB/s (H100, 10001 x 9001 FP16: 452 us -> 131 us; 2048 x
# 5001: 68 -> 21 us). With it wgmma_ws ran 150 x 9001 x 10001 in 244 us, cuBLAS 359
# (benchmarks/small-c-bf16-tuning.toml); the old copy had 162 x 13519 x 16147 at 0.64x cuBLAS.
REPITCH_SOURCE = r"""
extern "C" __global__ void repitch(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                   unsigned long long rows, unsigned long long length, unsigned long long pitch)
{
    const unsigned long long chunks = (length + 15) / 16, words = (rows * length + 15) / 16;
    const unsigned long long total = rows * chunks, step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
        const unsigned long long r = t / chunks, j = t - r * chunks, s = r * length + 16 * j, w = s / 16;
        const uint4 lo = src[w], hi = w + 1 < words ? src[w + 1] : make_uint4(0u, 0u, 0u, 0u);
        const unsigned q = (s % 16) / 4, b = (s % 4) * 8;
        const bool two = q & 2, one = q & 1;  // shift by 2 words, then 1, then b bits
        const unsigned y0 = two ? lo.z : lo.x, y1 = two ? lo.w : lo.y, y2 = two ? hi.x : lo.z,
                       y3 = two ? hi.y : lo.w, y4 = two ? hi.z : hi.x, y5 = two ? hi.w : hi.y;
        const unsigned z0 = one ? y1 : y0, z1 = one ? y2 : y1, z2 = one ? y3 : y2, z3 = one ? y4 : y3,
                       z4 = one ? y5 : y4;
        dst[r * (pitch / 16) + j] = make_uint4(__funnelshift_r(z0, z1, b), __funnelshift_r(z1, z2, b),
                                               __funnelshift_r(z2, z3, b), __funnelshift_r(z3, z4, b));
    }
}
"""
_repitch = []  # the compiled copy, once a process needs it


def tma_ready(array):
    """(`array` or a copy of it whose rows start 16-byte aligned, the copy to make before each launch or
    None). A row-major matrix whose row length in bytes is not a multiple of 16 (K or N not a multiple of
    8 for 16-bit types) cannot be read by TMA; a buffer with rows padded to the next multiple can, and the
    tensor map covers only the matrix's own columns (TMA fills zeros past them; the padding holds the
    next row's first bytes). The copy is part of the launch, so its time is in every measurement of it."""
    rows, cols = array.shape
    if array.strides[0] % TMA_PITCH == 0:
        return array, None
    cupy = cuda()
    per = TMA_PITCH // array.itemsize
    buffer = cupy.empty((rows, -(-cols // per) * per), dtype=array.dtype)
    padded = buffer[:, :cols]
    if not array.flags.c_contiguous or array.data.ptr % TMA_PITCH:
        def copy():  # not rows back to back from an aligned start: element by element
            padded[...] = array
        return padded, copy
    if not _repitch:
        _repitch.append(cupy.RawKernel(REPITCH_SOURCE, "repitch"))
    kernel, length, pitch = _repitch[0], cols * array.itemsize, buffer.strides[0]
    total = rows * -(-length // 16)
    args = (array, buffer, np.uint64(rows), np.uint64(length), np.uint64(pitch))
    grid = (min(-(-total // 256), 1 << 20),)

    def copy():
        kernel(grid, (256,), args)
    return padded, copy


def tma_output(C):
    """C itself, for a tensor map that TMA stores into: unlike an input, C cannot be copied to rows that
    start 16-byte aligned and back (that copy would be a second write of C), so its rows must already be
    (the template's launch.requires says which N; gemmlab allocates C whole, 256-byte aligned)."""
    if C.dtype.itemsize not in (2, 4) or C.strides[0] % TMA_PITCH or C.data.ptr % TMA_PITCH:
        raise GemmlabError(f"a TMA store needs C's rows 16-byte aligned and 2- or 4-byte elements: C is {C.dtype} "
                           f"with rows {C.strides[0]} bytes apart")
    return C


def load(compiled, name: str = ENTRY):
    """A kernel of the cubin as a cupy.RawKernel, loaded through cupy.RawModule (needs a GPU)."""
    cupy = cuda()
    if compiled.key not in _loaded:
        _loaded[compiled.key] = cupy.RawModule(path=str(compiled.cubin_path))
    return _loaded[compiled.key].get_function(name)


def gpc_order(function, geo, sms: int):
    """The table of a GPC order (gemmlab/gpu/gpc.py), for a grid of one block on every SM, all running at
    once; for other grids an empty table, which the kernel takes for its natural order."""
    from .gpc import gpc_map, order_argument, slot_table
    cluster, group = geo.gpc_order
    blocks = geo.grid[0] * geo.grid[1] * geo.grid[2]
    full = (blocks == sms and cuda().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
        function.kernel.ptr, geo.threads, geo.smem) == 1 and resident_blocks(function, geo, sms) >= blocks)
    return order_argument(slot_table(gpc_map(sms), sms, cluster, group) if full else None)


@dataclass
class Prepared:
    """A kernel loaded for one shape on this GPU, its limits checked: `bind` makes launches of it."""
    kernel: object          # kernel.Kernel
    plan: object            # kernel.LaunchPlan
    function: object        # cupy.RawKernel
    reduce: object = None   # the second kernel (split-K's sum), if the plan has one
    workspace: object = None
    order: object = None    # the GPC order's table, if the plan asks for one
    dtype: str = "fp32"
    repitched: tuple = ()   # the operands the last bind copies to 16-byte-aligned rows before each launch

    def bind(self, A, B, C, bias=None, Bt=None, scale_a=None, scale_b=None, arrival=None) -> Callable[[], None]:
        """The launch of C = A @ B (and the template's epilogue) on these arrays, with the arguments its
        template lists (templates.ARGUMENTS) made now: tensor maps are encoded once, not per launch.
        FP8 kernels also take B^T (N x K, for a K-major B) and the scales of A and B (results/fp8.py); a
        kernel with ARRIVAL on takes an arrival.Arrival, whose epoch is read at each launch."""
        geo, (M, K), N = self.plan, A.shape, B.shape[1]
        dims = (np.int32(M), np.int32(N), np.int32(K))
        boxes = dict(geo.tma)
        ready = {op: tma_ready(x) for op, x in (("A", A), ("B", B), ("Bt", Bt)) if op in boxes}
        copies = [copy for _, copy in ready.values() if copy is not None]
        self.repitched = tuple(op for op, (_, copy) in ready.items() if copy is not None)
        provide = {"A": lambda: A, "B": lambda: B, "C": lambda: C, "M": lambda: dims[0], "N": lambda: dims[1],
                   "K": lambda: dims[2], "workspace": lambda: self.workspace, "gpc_order": lambda: self.order,
                   "tma.A": lambda: tensor_map(ready["A"][0], boxes["A"], self.dtype),
                   "tma.B": lambda: tensor_map(ready["B"][0], boxes["B"], self.dtype),
                   "tma.Bt": lambda: tensor_map(ready["Bt"][0], boxes["Bt"], self.dtype),
                   "tma.C": lambda: tensor_map(tma_output(C), boxes["C"], "fp32" if C.itemsize == 4 else "bf16"),
                   "scale.A": lambda: scale_a, "scale.B": lambda: scale_b,
                   "alpha": lambda: np.float32(ALPHA), "beta": lambda: np.float32(BETA), "bias": lambda: bias}
        if "arrival" in geo.args:
            if arrival is None:
                raise GemmlabError(f"variant '{self.kernel.name}' with ARRIVAL on waits for rows that arrive: "
                                   "it runs under gemmlab dist (allgather_overlap with arrival = true), not alone")
            params = self.kernel.params
            arrival.check(M, int(params.get("BM", 1)) * int(params.get("CLUSTER_M", 1)))
        elif arrival is not None:
            raise GemmlabError(f"variant '{self.kernel.name}' does not wait for arriving rows (no ARRIVAL parameter "
                               "on): it cannot start before the all-gather ends")
        provide["arrival"] = lambda: arrival.argument()
        args = tuple(provide[name]() for name in geo.args)
        at = geo.args.index("arrival") if "arrival" in geo.args else None
        function, reduce, workspace = self.function, self.reduce, self.workspace

        def launch():
            for copy in copies:  # rows TMA cannot read where they are: into a buffer where it can
                copy()
            if geo.zero_output:  # the kernel adds into C: part of its work, so inside any timing
                C.fill(0)
            now = args if at is None else args[:at] + (arrival.argument(),) + args[at + 1:]  # this epoch
            function(geo.grid, geo.block, now, shared_mem=geo.smem)
            if reduce is not None:  # e.g. split-K: sum the partial products from the workspace into C
                reduce(geo.reduce_grid, geo.reduce_block, (workspace, C) + dims)
        return launch


def prepare(kernel, M: int, N: int, K: int, device, workspace=None, sms: int | None = None) -> Prepared:
    """Load `kernel` for an M x N x K product on `device` (a DeviceInfo): the plan for `sms` SMs (default:
    all of them; fewer leave SMs free for another stream's kernels), shared memory opted into, a grid whose
    blocks wait for each other checked to fit at once. `workspace(nbytes)` allocates scratch memory
    (default: a new array). GemmlabError where the kernel cannot run here."""
    variant, compiled = kernel.variant, kernel.compiled
    plan = kernel.plan(M, N, K, sms or device.sms)
    limit = device.smem_optin
    if compiled.resources.smem + plan.smem > limit:
        raise GemmlabError(
            f"variant '{variant.name}' needs {compiled.resources.smem + plan.smem} bytes of shared "
            f"memory per block; {device.name} allows at most {limit}")
    function = load(compiled)
    if plan.smem > device.smem_per_block:
        function.max_dynamic_shared_size_bytes = plan.smem  # opt in above the default (48 KB on the H100)
    if plan.resident:  # its blocks wait for each other: a block that is not running yet would hang them
        blocks, fits = plan.grid[0] * plan.grid[1] * plan.grid[2], resident_blocks(function, plan, device.sms)
        if fits < blocks:
            raise GemmlabError(
                f"variant '{variant.name}' needs all {blocks} blocks of its grid running at once (its blocks "
                f"wait for each other: launch.resident is {variant.resident}), and {device.name} holds {fits}",
                hint=f"choose parameters that make {variant.resident} false")
    if plan.workspace:
        workspace = workspace(plan.workspace) if workspace else cuda().empty(plan.workspace, dtype=np.uint8)
    else:
        workspace = None
    return Prepared(kernel, plan, function, reduce=load(compiled, "reduce") if plan.reduce_grid else None,
                    workspace=workspace, order=gpc_order(function, plan, device.sms) if plan.gpc_order else None,
                    dtype=kernel.dtype)
