#!/bin/bash
# The tensor-core ladder against cuBLAS on the same inputs, per input type, in 5 alternating rounds
# (H100 results in benchmarks/):
#   bash benchmarks/tensor.sh DIR    -> DIR/tensor-{bf16,fp16}-{4096,8192}.json, DIR/tensor-tf32-4096.json
set -e
out=${1:?usage: benchmarks/tensor.sh DIR}
mkdir -p "$out"
for size in 4096 8192; do
  for dtype in bf16 fp16; do
    variants=wmma,mma,wgmma,wgmma_ws,wgmma_pingpong
    [ "$size" = 8192 ] && variants=mma,wgmma,wgmma_ws,wgmma_pingpong  # wmma takes 10 s a run there and says nothing new
    gemmlab compare --rounds 5 --dtype $dtype --variants $variants --size $size --out "$out/tensor-$dtype-$size.json" || true
  done
done
gemmlab compare --rounds 5 --dtype tf32 --variants wmma,mma,wgmma_tf32 --size 4096 --out "$out/tensor-tf32-4096.json" || true
