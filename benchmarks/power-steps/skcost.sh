#!/bin/bash
# Stream-K's cost constant (SK_COST, K steps a hand-over costs) at 12, the measured one, against 4, which makes
# wgmma_ws stream 4096^3's last wave too; timed against cuBLAS in alternating processes (6 rounds each, twice),
# the constant edited into kernels/stream_k.j2 here. Usage: bash benchmarks/power-steps/skcost.sh OUTDIR
out=${1:?usage: skcost.sh OUTDIR}
mkdir -p "$out"
for i in 1 2; do
  for c in 12 4; do
    sed -i "s/{% set SK_COST = [0-9]* %}/{% set SK_COST = $c %}/" kernels/stream_k.j2
    echo "== SK_COST $c ($i)"
    CASES=benchmarks/power-steps/cases14.py timeout 100 python3 benchmarks/lean-steps/interleave.py 6 "$out/sk-$c-$i.json" 2>&1 | tail -3
  done
done
