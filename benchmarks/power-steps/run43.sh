#!/bin/bash
# Run 43: the TMA tensor maps' L2 promotion again, 256 bytes (gemmlab's setting) against 128, with the 46-instruction
# K step, at 4096^3 only (run 11 had 128 ahead in 4 of 5 cases by 0.4-1.1%, within its spread): the two settings in
# alternating processes, 6 rounds each, 4 times; edited into the runner here and put back at the end.
# Usage: bash benchmarks/power-steps/run43.sh OUTDIR
out=${1:?usage: run43.sh OUTDIR}
mkdir -p "$out"
for i in 1 2 3 4; do
  for p in L2_256B L2_128B; do
    sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_$p,/" gemmlab/runner.py
    echo "== $p ($i)"
    CASES=benchmarks/power-steps/cases43.py timeout 100 python3 benchmarks/lean-steps/interleave.py 6 "$out/p-$p-$i.json" 2>&1 | tail -2
  done
done
git checkout gemmlab/runner.py
python3 - "$out" <<'PY'
import json, sys, glob, numpy as np
from collections import defaultdict
r = defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/p-*.json")):
    p = f.split("/p-")[1].rsplit("-", 1)[0]
    log = json.load(open(f))["log"]
    for dt in ("bf16", "fp16"):
        cb = [x["ms"] for x in log if x["dtype"] == dt and x["label"] == "cuBLAS"]
        us = [x["ms"] for x in log if x["dtype"] == dt and x["label"] != "cuBLAS"]
        r[(dt, p)] += [c / o for c, o in zip(cb, us)]
for (dt, p), v in sorted(r.items()):
    print(f"{dt} 4096 {p}: median {np.median(v):.3f} mean {np.mean(v):.3f} over {len(v)} rounds")
PY
