#!/bin/bash
# Run 41: the README's BF16 and FP16 tables at this commit (benchmarks/tensor.sh's compares, 5 rounds each), then
# wgmma_ws against cuBLAS at 4096^3 in 20 interleaved rounds (cases41.py).
# Usage: bash benchmarks/power-steps/run41.sh OUTDIR
out=${1:?usage: run41.sh OUTDIR}
mkdir -p "$out"
for size in 4096 8192; do
  for dtype in bf16 fp16; do
    variants=wmma,mma,wgmma,wgmma_ws,wgmma_pingpong
    [ "$size" = 8192 ] && variants=mma,wgmma,wgmma_ws,wgmma_pingpong
    timeout 150 gemmlab compare --rounds 5 --dtype $dtype --variants $variants --size $size --out "$out/h100-tensor-$dtype-$size.json" > "$out/compare-$dtype-$size.txt" 2>&1
    tail -3 "$out/compare-$dtype-$size.txt"
  done
done
CASES=benchmarks/power-steps/cases41.py timeout 200 python3 benchmarks/lean-steps/interleave.py 20 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
