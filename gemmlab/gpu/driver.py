"""The GPU's libraries, imported on first use: cupy (with the reason when it cannot be had) and the CUDA
driver bindings (tensor maps, cluster occupancy), and torch where a reference row needs it. Everything
else on the GPU side starts here.
"""

from __future__ import annotations

from ..errors import GemmlabError


def _driver_version() -> int | None:
    """The CUDA version the NVIDIA driver supports (12040 for 12.4), or None when there is no driver."""
    import ctypes
    import sys
    try:
        lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    try:
        lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError:
        return 0
    return version.value


def _why_no_cuda(e: Exception) -> str:
    """cupy's error in words a user can act on: no driver, a driver too old, or no GPU."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    if "cudaErrorNoDevice" in text:
        return "the NVIDIA driver sees no GPU (cudaErrorNoDevice)"
    if "InsufficientDriver" in text or "cudaErrorNoDriver" in text or "libcuda" in text:
        driver = _driver_version()
        if driver is None:
            return "no NVIDIA driver found (libcuda.so.1 cannot be loaded)"
        if "InsufficientDriver" in text and driver:
            return (f"the NVIDIA driver supports CUDA up to {driver // 1000}.{driver % 1000 // 10}, older than "
                    "the CUDA runtime gemmlab's cupy needs; update the driver")
    return text


def cuda():
    """Import cupy, or explain why there is no GPU to use."""
    import os
    # FP32 means FP32: cupy.matmul must not switch to TF32 behind our back (it would if CUPY_TF32=1).
    os.environ["CUPY_TF32"] = "0"
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        raise GemmlabError(f"no CUDA GPU is available: {_why_no_cuda(e)}",
                           hint="this command runs kernels; `gemmlab build`, `show` and `list` work "
                                "without a GPU (give --arch sm_90)") from None
    if count == 0:
        raise GemmlabError("no CUDA GPU is available: the driver reports 0 devices")
    return cupy


def bindings():
    """cuda-bindings' driver module: TMA tensor maps, cluster occupancy."""
    try:
        from cuda.bindings import driver as drv
    except ImportError:
        raise GemmlabError("TMA and cluster variants need cuda-bindings (tensor maps, cluster occupancy)",
                           hint="pip install cuda-bindings") from None
    return drv


def torch_with_cuda():
    """torch, where it is installed and sees a GPU; else None (the reference rows that need it are left out
    with a note: gpu/references.py, gpu/fp8_refs.py)."""
    try:
        import torch
    except ImportError:
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # a torch whose CUDA libraries do not load
        return None
