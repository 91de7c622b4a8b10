#!/bin/bash
# Run 25: does the data move the clock? wgmma_tf32 and cuBLAS alone after idle at free clocks (ncu) on random
# inputs, on B = 1 (our register-fed operand constant) and on A = 1 (inputs.py).
# Usage: bash benchmarks/power-steps/run25.sh OUTDIR
out=${1:?usage: run25.sh OUTDIR}
mkdir -p "$out"
timeout 150 ncu --clock-control none -k 'regex:^gemm$|xmma' \
  --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second \
  python3 benchmarks/power-steps/inputs.py > "$out/ncu.txt" 2>&1
python3 - "$out/ncu.txt" <<'PY' | tee "$out/summary.txt"
import re, sys
rows, cur = [], None
for line in open(sys.argv[1]):
    m = re.match(r"^  (\S+) \(", line)
    if m:
        cur = {"k": "cuBLAS" if m.group(1).startswith("sm90_xmma") else m.group(1)}; rows.append(cur); continue
    m = re.match(r"^\s+(\S+)\s+\S+\s+([\d,.]+)$", line.rstrip())
    if cur is not None and m:
        cur[m.group(1).split("__")[0]] = m.group(2)
rows = [r for r in rows if not r["k"].startswith("sm80")]
kinds = [k for k in ("random", "B=1", "A=1") for _ in range(4)]
for kind, r in zip(kinds, rows):
    print(f"{kind:7s} {r['k'][:10]:10s} {r['gpc']:>5s} GHz {r['gpu']:>8s} us {r['sm']:>9s} cycles")
PY
