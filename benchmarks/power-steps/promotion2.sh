#!/bin/bash
# The TMA tensor maps' L2 promotion, 256 bytes (gemmlab's setting) against 128, timed against cuBLAS: the two
# settings in alternating processes (6 rounds each, twice), edited into the runner here.
# Usage: bash benchmarks/power-steps/promotion2.sh OUTDIR
out=${1:?usage: promotion2.sh OUTDIR}
mkdir -p "$out"
for i in 1 2; do
  for p in L2_256B L2_128B; do
    sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_$p,/" gemmlab/runner.py
    echo "== $p ($i)"
    CASES=benchmarks/power-steps/cases10.py timeout 140 python3 benchmarks/lean-steps/interleave.py 6 "$out/p-$p-$i.json" 2>&1 | tail -6
  done
done
