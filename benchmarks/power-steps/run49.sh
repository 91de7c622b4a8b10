#!/bin/bash
# Run 49: what decides how many of wgmma_ws's plain loads the L2 request coalescer merges (about 1M sectors of
# 16.8M, against cuBLAS's 4.7M: run 47)? The tensor maps' L2 promotion (edited into the runner here, put back at
# the end), and the ring's depth (STAGES 3: the producer runs a stage less ahead). ncu at the base clock, bf16 4096^3.
# Usage: bash benchmarks/power-steps/run49.sh OUTDIR
out=${1:?usage: run49.sh OUTDIR}
mkdir -p "$out"
M=lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum,sm__cycles_elapsed.max
for p in L2_256B L2_128B L2_64B NONE; do
  sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_$p,/" gemmlab/runner.py
  echo "== promotion $p"
  XCONFIGS='[["wgmma_ws", {}]]' timeout 200 ncu --clock-control base -k 'regex:^gemm$' --metrics $M \
    python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu-$p.txt" 2>&1
  grep -E "lrc|lts|dram|cycles" "$out/ncu-$p.txt" | grep -v "==PROF==" | sed 's/  */ /g'
done
git checkout gemmlab/runner.py
echo "== STAGES 3"
XCONFIGS='[["wgmma_ws", {"STAGES": 3}]]' timeout 200 ncu --clock-control base -k 'regex:^gemm$' --metrics $M \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu-stages3.txt" 2>&1
grep -E "lrc|lts|dram|cycles" "$out/ncu-stages3.txt" | grep -v "==PROF==" | sed 's/  */ /g'
