#!/bin/bash
# Run 63 (timeline.patch): the fixed cost of a launch, with one tile per SM pair of blocks: 2048 x 2048 x 64 (one K
# step) and x 1024. ncu's cycles at the base clock for wgmma_ws, ws_t NOSTORE (no C store), ws_t EARLY + RELAXED +
# SCALE_D and cuBLAS; wgmma_ws again with the tensor maps' L2 promotion at 128 bytes (edited into the runner for
# the run, then put back); the timeline at 2048 x 2048 x 64.
# Usage: bash benchmarks/power-steps/run63.sh OUTDIR
out=${1:?usage: run63.sh OUTDIR}
mkdir -p "$out" /tmp/k
git show c2c5bab:kernels/wgmma_ws.cu.j2 > /tmp/k/ws_t.cu.j2 && patch -s /tmp/k/ws_t.cu.j2 benchmarks/power-steps/timeline.patch || exit 1  # the template before run 66
export KDIRS=/tmp/k
ERS='"EARLY": true, "RELAXED": true, "SCALE_D": true'
. benchmarks/power-steps/ncu_cycles.sh
for s in 2048x2048x64 2048x2048x1024; do
  echo "== $s: wgmma_ws, NOSTORE, EARLY + RELAXED + SCALE_D (3 launches each), cuBLAS"
  NLAUNCH=3 XCONFIGS="[[\"wgmma_ws\", {}], [\"ws_t\", {\"NOSTORE\": true}], [\"ws_t\", {$ERS}]]" NCU_TIMEOUT=100 ncu_cycles "$out/ncu-$s.txt" $s
done
cp gemmlab/runner.py /tmp/runner.py.bak
sed -i 's/CU_TENSOR_MAP_L2_PROMOTION_L2_256B/CU_TENSOR_MAP_L2_PROMOTION_L2_128B/' gemmlab/runner.py
for s in 2048x2048x64 2048x2048x1024 4096; do
  echo "== $s, L2 promotion 128 B: wgmma_ws"
  NLAUNCH=3 XCONFIGS='[["wgmma_ws", {}]]' NCU_TIMEOUT=100 ncu_cycles "$out/ncu-128B-$s.txt" $s 'regex:^gemm$'
done
cp /tmp/runner.py.bak gemmlab/runner.py
SHAPE=2048x2048x64 timeout 100 python3 benchmarks/power-steps/timeline.py "$out/timeline.json" '{}' "{$ERS}" \
  > "$out/timeline.txt" 2>&1; tail -3 "$out/timeline.txt"
