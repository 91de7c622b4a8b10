"""ABBA-interleaved timing: cuBLAS and our kernels alternate, so slow drift (temperature) hits both alike.
Usage: python3 .exp/inter.py ROUNDS"""
import sys, time, json, numpy as np, cupy as cp, gemmlab
from gemmlab.runner import Problem, Shape
R = int(sys.argv[1]) if len(sys.argv) > 1 else 4
CASES = [("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 2}), ("wgmma_ws", {"BM": 192, "BN": 192})]),
         ("fp16", 8192, [("wgmma_ws", {})]),
         ("bf16", 4096, [("wgmma_ws", {})]),
         ("fp16", 4096, [("wgmma_ws", {})]),
         ("tf32", 4096, [("wgmma_tf32", {})]),
         ("fp32", 4096, [("pipelined", {})]),
         ("fp32", 8192, [("pipelined", {})])]
import os
cases = eval(open(os.environ["CASES"]).read()) if os.environ.get("CASES") else CASES
cat = gemmlab.catalog(tuple(os.environ.get("KDIRS", "").split(":")) if os.environ.get("KDIRS") else ())
log = []
summary = []
t0 = time.time()
for dtype, n, ours in cases:
    pr = Problem(Shape(*n) if isinstance(n, tuple) else Shape(n, n, n), seed=1, dtype=dtype)
    built = []
    for name, over in ours:
        v = cat.get(name)
        p = v.resolve(v.for_dtype(dtype if dtype != "fp32" else None, over))
        built.append((name + (" " + ",".join(f"{k}={x}" for k, x in over.items()) if over else ""), v, p, gemmlab.build(v, p)))
    labels = ["cuBLAS"] + list(dict.fromkeys(b[0] for b in built))
    times = {l: [] for l in labels}
    def measure(label):
        ts = time.time() - t0
        if label == "cuBLAS":
            r = pr.cublas()
        else:
            name, v, p, c = next(b for b in built if b[0] == label)
            r = pr.run(v, p, c)
        ok = r.check.passed
        ms = r.timing.median_ms if r.timing else float("nan")
        times[label].append(ms)
        log.append(dict(t=ts, t_end=time.time() - t0, dtype=dtype, n=n, label=label, ms=ms, ok=ok, err=r.check.rel_err))
    for rnd in range(R):
        order = labels if rnd % 2 == 0 else labels[::-1]
        for l in order:
            measure(l)
    cb = np.array(times["cuBLAS"])
    for l in labels[1:]:
        o = np.array(times[l])
        ratios = cb / o
        summary.append((dtype, n, l, float(np.median(cb)), float(np.median(o)), ratios))
json.dump({"t0": t0, "log": log}, open(sys.argv[2] if len(sys.argv) > 2 else "/tmp/inter.json", "w"), indent=1)
print(f"{'case':28s} {'cuBLAS ms':>9s} {'ours ms':>9s}  ratio per round (cuBLAS/ours)          median")
for dtype, n, l, cb, o, ratios in summary:
    print(f"{dtype} {n} {l:18s} {cb:9.4f} {o:9.4f}  " + " ".join(f"{x:.3f}" for x in ratios) + f"   {np.median(ratios):.3f}")
