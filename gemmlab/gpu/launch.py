"""What a launch needs from the driver: how many blocks fit at once, TMA tensor maps, and cuBLAS."""

from __future__ import annotations

import numpy as np

from ..errors import GemmlabError
from ..compile import ENTRY
from .driver import bindings, cuda

CUBLAS_SOURCE = {"fp32": "cupy.matmul", "tf32": "cublasGemmEx TF32", "fp16": "cublasGemmEx FP16",
                 "bf16": "cublasGemmEx BF16"}
_ONE, _ZERO = np.ones(1, np.float32), np.zeros(1, np.float32)  # alpha and beta for cuBLAS (host pointers)


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
    """A TMA tensor map over a row-major matrix, for `cp.async.bulk.tensor`: `box` elements of it per
    copy (contiguous dimension first), 128-byte swizzled in shared memory, zeros outside the matrix.
    Returned as 128 raw bytes, which cupy passes by value to a `const __grid_constant__` parameter."""
    import ctypes
    drv = bindings()
    kinds = {"bf16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             "fp16": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             # tf32: FP32 in memory, which the copy engine rounds to TF32 (to nearest, as cuBLAS's kernel
             # has it) on the way into shared memory, so that the tensor cores read rounded operands and the
             # zeroed low bits stop toggling (H100: 1.62 -> 1.65 GHz under the power cap, 3% faster;
             # docs/journal.md, "TF32: wgmma_tf32")
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


_loaded: dict[str, object] = {}  # key -> cupy.RawModule


def load(compiled, name: str = ENTRY):
    """A kernel of the cubin as a cupy.RawKernel, loaded through cupy.RawModule (needs a GPU)."""
    cupy = cuda()
    if compiled.key not in _loaded:
        _loaded[compiled.key] = cupy.RawModule(path=str(compiled.cubin_path))
    return _loaded[compiled.key].get_function(name)
