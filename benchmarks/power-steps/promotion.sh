#!/bin/bash
# L2 traffic (ncu, base clock) and interleaved time against cuBLAS of wgmma_ws at bf16 4096^3, with the TMA
# tensor maps' L2 promotion at 256 bytes (gemmlab's setting), 128 bytes and none (edited into the runner here).
# Usage: bash benchmarks/power-steps/promotion.sh OUTDIR
out=${1:?usage: promotion.sh OUTDIR}
mkdir -p "$out"
export XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"CLUSTER_M": 2, "STREAM_K": false}]]'
M=sm__cycles_elapsed.max,lts__t_bytes.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum
for p in L2_256B L2_128B NONE; do
  sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_$p,/" gemmlab/runner.py
  grep -o "CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*" gemmlab/runner.py
  ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics $M python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 \
    > "$out/ncu-$p.txt" 2>&1
  grep -E "^  [a-z_]+ \(|^  nvjet|cycles_elapsed|lts__|dram__|ERR" "$out/ncu-$p.txt" | sed 's/Context.*//' | head -40
  CASES=benchmarks/power-steps/cases8.py timeout 120 python3 benchmarks/lean-steps/interleave.py 8 "$out/inter-$p.json" \
    2>&1 | tail -3
done
