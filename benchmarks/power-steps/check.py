"""Correctness of wgmma_ws experiments (NaN-poisoned C, fresh inputs, checked after timing too).
Usage: [KDIRS=/tmp/k] [VARIANT=wgmma_ws] [ONLY=0,5,11] python3 benchmarks/power-steps/check.py '{"LAG": 1}' '{"LAG": 2}' ..."""
import json, os, sys, gemmlab
from gemmlab.runner import Problem, Shape
v = gemmlab.catalog(tuple(os.environ["KDIRS"].split(":")) if os.environ.get("KDIRS") else ()).get(os.environ.get("VARIANT", "wgmma_ws"))
overs = [json.loads(a) for a in sys.argv[1:]] or [{}]
shapes = [("bf16", (4096, 4096, 4096), {}), ("fp16", (1000, 1032, 1048), {}),
          ("bf16", (2000, 3000, 1000), {}), ("fp16", (2049, 2056, 72), {}),   # 2 K steps: fewer than LAG + 1
          ("bf16", (77, 40, 24), {"STAGES": 3}), ("bf16", (128 * 19, 256 * 7, 64 * 64), {}),  # 133 tiles: streamed
          ("bf16", (1000, 1032, 1048), {"EPILOGUE": "alpha_beta"}), ("fp16", (2000, 3000, 1000), {"EPILOGUE": "bias_relu"}),
          ("bf16", (4000, 3000, 2000), {"BM": 192, "BN": 192, "STAGES": 3}),
          # stream-K's last wave, also in 2-block clusters (68 cluster tiles of 256 x 256 on 66 clusters):
          ("bf16", (512, 8704, 1024), {}), ("fp16", (1000, 4352, 1048), {"EPILOGUE": "alpha_beta"}),
          ("bf16", (8192, 8192, 8192), {})]
if os.environ.get("ONLY"):  # a subset, by index (ONLY=0,5,11: the shapes that fill the whole persistent grid)
    shapes = [shapes[int(i)] for i in os.environ["ONLY"].split(",")]
bad = 0
for over in overs:
    for dtype, shape, extra in shapes:
        params = dict(over, **extra)
        if v.name == "wgmma_tf32":  # the same shapes in tf32, at its own tile
            dtype = "tf32"
            params.pop("BN", None), params.pop("BM", None)
        try:
            p = v.resolve(v.for_dtype(dtype, params))
        except Exception as e:  # a constraint: not a failure of the kernel
            print(f"{dtype} {shape} {params}: skipped ({e})", flush=True)
            continue
        pr = Problem(Shape(*shape), seed=7, dtype=dtype)
        c = gemmlab.build(v, p)
        r = pr.run(v, p, c, timed=True, min_reps=3)
        ok = r.check.passed and not r.fault
        r2 = pr.run(v, p, c, timed=False)
        ok = ok and r2.check.passed
        bad += not ok
        print(f"{dtype} {shape} {params}: {'PASS' if ok else 'FAIL'} rel_err {r.check.rel_err:.2e} {r.error or ''}", flush=True)
print("check:", "all passed" if not bad else f"{bad} FAILED")
sys.exit(1 if bad else 0)
