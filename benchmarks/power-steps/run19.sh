#!/bin/bash
# Run 19: the tensor maps' L2 promotion, 256 bytes (the runner's) against 128, with wgmma_tf32's clusters:
# the two settings in alternating processes, 8 interleaved rounds each, three times; then the sustained
# clock of each (energy.py, 2 rounds).
# Usage: bash benchmarks/power-steps/run19.sh OUTDIR
out=${1:?usage: run19.sh OUTDIR}
mkdir -p "$out"
for i in 1 2 3; do
  for p in L2_256B L2_128B; do
    sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_$p,/" gemmlab/runner.py
    echo "== $p ($i)"
    CASES=benchmarks/power-steps/cases19.py timeout 150 python3 benchmarks/lean-steps/interleave.py 8 "$out/p-$p-$i.json" 2>&1 | tail -3
  done
done 2>&1 | tee "$out/promotion.txt"
for p in L2_256B L2_128B; do
  sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_$p,/" gemmlab/runner.py
  echo "== $p"
  CASES=benchmarks/power-steps/cases19e.py timeout 100 python3 benchmarks/power-steps/energy.py 2 "$out/energy-$p.json" 2>&1 | tail -4
done 2>&1 | tee "$out/energy.txt"
git checkout -q gemmlab/runner.py
