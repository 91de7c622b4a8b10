"""The FP8 cuBLAS row: cuBLASLt's FP8 GEMM through torch._scaled_mm, on the very codes and scales a gemmlab
kernel gets (gemmlab/gpu/problem.py's FP8 inputs). (`--refs cublaslt` adds cuBLASLt's FP8 GEMM through
nvmath-python beside it, its heuristics' algorithms autotuned: gemmlab/gpu/references.py.)

torch is not a dependency of gemmlab: where it is missing, or refuses a scaling mode, the reference is None
with a one-line note of why, and its row is left out with that note; never an error.

    launch, note = scaled_mm(inputs, C, dtype)     # per-tensor (inputs.scale "tensor") or row scales
    launch()                                       # C (M x N, C's type) = the dequantised A @ B

It takes B^T (N x K, row-major), which is B column-major: cuBLASLt's FP8 GEMM on Hopper takes only the
"TN" layout, as FP8 wgmma does.
"""

from __future__ import annotations

import contextlib

from .driver import cuda, torch_with_cuda


def scaled_mm(inputs, C, dtype: str, fast_accum: bool = False):
    """torch._scaled_mm on `inputs` (problem.Inputs of an FP8 dtype) into C. `fast_accum`: cuBLASLt's FP8 fast
    accumulation (the tensor cores sum all of K, no promotion). (launch, None) or (None, why not)."""
    torch = torch_with_cuda()
    if torch is None:
        return None, "torch with CUDA is not installed: no torch._scaled_mm row"
    if not hasattr(torch, "_scaled_mm"):
        return None, f"torch {torch.__version__} has no _scaled_mm (FP8 GEMM): no torch._scaled_mm row"
    cupy = cuda()
    kinds = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    M, K = inputs.A.shape
    N = inputs.Bt.shape[0]
    # torch's own copies of the codes and scales, made here, outside any timing
    own = lambda x: torch.from_dlpack(x).clone()  # noqa: E731
    a = own(inputs.A).view(kinds[dtype])
    b = own(inputs.Bt).view(kinds[dtype]).t()  # K x N, column-major
    sa, sb = own(inputs.scale_a), own(inputs.scale_b)
    if inputs.scale == "tensor":
        layouts = [(sa.reshape(()), sb.reshape(()))]
    elif inputs.scale == "row":
        layouts = [(sa.reshape(M, 1), sb.reshape(1, N))]
    else:  # block scales: on an H100 with torch 2.11, _scaled_mm took A's [K/128][M] read as M x K/128 and B's
        # [K/128][N/128] and returned a C wrong in most tiles (the check caught it at 662e22f and 835a449);
        # until a layout is known right, no row rather than a wrong one
        return None, ("no torch._scaled_mm row for block scales: the layouts tried gave a wrong C on an H100 "
                      "(docs/fp8.md)")
    out = torch.from_dlpack(C)
    if out.dtype == torch.uint16:  # a bf16 C is held as its bits (cupy has no bfloat16)
        out = out.view(torch.bfloat16)
    # On cupy's stream. Where that is the default stream (cupy's own default), torch's default is the same one,
    # and torch is left on it. At 591e898, wrapped in torch.cuda.stream(ExternalStream(0)), this call left C
    # untouched on the H100 (3 us a call), where a plain _scaled_mm on torch's default stream into the same
    # cupy C wrote it (1200 TFLOP/s at 4096^3); that the wrapper was the difference is not yet confirmed on a GPU.
    ptr = cupy.cuda.get_current_stream().ptr
    on_stream = (lambda: torch.cuda.stream(torch.cuda.ExternalStream(ptr))) if ptr else contextlib.nullcontext
    why = None
    for sa, sb in layouts:
        def into_c(sa=sa, sb=sb):  # written straight into C
            with on_stream():
                torch._scaled_mm(a, b, sa, sb, out_dtype=out.dtype, use_fast_accum=fast_accum, out=out)

        def copied(sa=sa, sb=sb):  # (a torch without the out= form: its result copied into C, inside the time)
            with on_stream():
                out.copy_(torch._scaled_mm(a, b, sa, sb, out_dtype=out.dtype, use_fast_accum=fast_accum))
        for launch in (into_c, copied):
            try:
                out.fill_(float("nan"))
                launch()  # a layout, shape or mode it does not take fails here, with its reason
                torch.cuda.synchronize()
                if not bool(torch.isfinite(out[0, 0]) & torch.isfinite(out[-1, -1])):  # (on the H100 one form
                    why = why or "it left C unwritten"  # once returned without writing C, 3 us a call)
                    continue
                return launch, None
            except (RuntimeError, ValueError, TypeError) as e:
                why = why or str(e).strip().splitlines()[0][:200]
    return None, f"torch._scaled_mm refused {inputs.scale} scales: {why}"
