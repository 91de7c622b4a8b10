#!/bin/bash
# The speed goals of the tensor-core rungs: wgmma_ws (bf16, fp16) and wgmma_tf32 (tf32) head to head with cuBLAS
# on the same inputs, 20 rounds taken in alternating turns, so that the power cap's clock touches both alike
# (H100 results in benchmarks/h100-versus-*.json):
#   bash benchmarks/versus.sh DIR    -> DIR/versus-{bf16,fp16}-{4096,8192}.json, DIR/versus-tf32-4096.json
set -e
out=${1:?usage: benchmarks/versus.sh DIR}
mkdir -p "$out"
for size in 4096 8192; do
  for dtype in bf16 fp16; do
    gemmlab compare --rounds 20 --dtype $dtype --variants wgmma_ws --size $size --out "$out/versus-$dtype-$size.json" || true
  done
done
gemmlab compare --rounds 20 --dtype tf32 --variants wgmma_tf32 --size 4096 --out "$out/versus-tf32-4096.json" || true
