"""TMA-store epilogue correctness (ws_x TMA_STORE=true)."""
import sys, gemmlab
from gemmlab.runner import Problem, Shape
import os
cat = gemmlab.catalog(tuple(os.environ.get("KDIRS", ".exp/kd").split(":")))
v = cat.get("ws_x")
cases = [("bf16", (4096, 4096, 4096), {}), ("fp16", (8192, 8192, 8192), {}),
         ("bf16", (896, 4864, 4096), {}),
         ("bf16", (1000, 1032, 1048), {}),
         ("bf16", (2000, 3000, 1000), {}),
         ("fp16", (2049, 2056, 72), {}),
         ("bf16", (1000, 1032, 1048), {"EPILOGUE": "alpha_beta"}),
         ("fp16", (2000, 3000, 1000), {"EPILOGUE": "bias_relu"}),
         ("bf16", (2000, 3000, 1000), {"CBUF": 1}),
         ("bf16", (77, 40, 24), {"CBUF": 4, "STAGES": 3}),
         ("bf16", (4000, 3000, 2000), {"BM": 192, "BN": 192, "STAGES": 3})]
bad = 0
for dtype, shape, over in cases:
    pr = Problem(Shape(*shape), seed=3, dtype=dtype)
    p = v.resolve(v.for_dtype(dtype, dict(over, TMA_STORE=True)))
    r = pr.run(v, p, gemmlab.build(v, p), timed=True, min_reps=3)
    ok = r.check.passed and not r.fault
    r2 = pr.run(v, p, gemmlab.build(v, p), timed=False)
    ok = ok and r2.check.passed
    bad += not ok
    print(f"{dtype} {shape} {over}: {'PASS' if ok else 'FAIL'} rel_err {r.check.rel_err:.2e} "
          f"{r.timing.median_ms if r.timing else float('nan'):.4f} ms {r.error or ''}", flush=True)
print("TMA store check:", "all passed" if not bad else f"{bad} FAILED")
