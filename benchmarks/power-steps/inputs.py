"""Launch wgmma_tf32 (or XVARIANT) and cuBLAS on 4096^3 tf32 inputs of three kinds, for ncu: both random, B
constant (the operand our kernel feeds the tensor cores from registers), A constant. Results are not checked
(the reference is for random inputs); only the clock and cycles matter here.
Usage: ncu ... python3 benchmarks/power-steps/inputs.py"""
import os, cupy as cp, gemmlab
from gemmlab.runner import Problem, Shape, cublas_gemm
v = gemmlab.catalog().get(os.environ.get("XVARIANT", "wgmma_tf32"))
params = v.resolve(v.for_dtype("tf32", {}))
c = gemmlab.build(v, params)
for kind in ("random", "B=1", "A=1"):
    p = Problem(Shape(4096, 4096, 4096), dtype="tf32")
    if kind == "B=1":
        p.B[...] = 1.0
    if kind == "A=1":
        p.A[...] = 1.0
    for _ in range(2):
        p.run(v, params, c, timed=False)
    for _ in range(2):
        cublas_gemm(p.A, p.B, p.C, "tf32")
    cp.cuda.Device().synchronize()
    print(kind, "done", flush=True)
