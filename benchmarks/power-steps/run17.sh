#!/bin/bash
# Run 17: wgmma_tf32 with CLUSTER_N=2 and PAIRS: GROUP_M 4/8/16 and STAGES 3 (12 interleaved rounds), then the
# tensor maps' L2 promotion (256 bytes, 128, none) in alternating processes, 4 rounds each, twice; L2 and fabric
# traffic of each (ncu, clock at base).
# Usage: bash benchmarks/power-steps/run17.sh OUTDIR
out=${1:?usage: run17.sh OUTDIR}
mkdir -p "$out"
export XCONFIGS='[["wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": true}], ["wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": true, "GROUP_M": 4}],
  ["wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": true, "GROUP_M": 16}]]'
M=sm__cycles_elapsed.max,lts__t_bytes.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum
timeout 120 ncu --clock-control base -k 'regex:^gemm$|xmma' --metrics $M \
  python3 benchmarks/store-steps/ncu_launches.py 4096 tf32 > "$out/ncu-groupm.txt" 2>&1
grep -E "^  [a-zA-Z_]+.*\(|cycles|bytes|fabric" "$out/ncu-groupm.txt" | grep -v "==PROF==\|sm80" | head -40
CASES=benchmarks/power-steps/cases17.py python3 benchmarks/lean-steps/interleave.py 12 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
export XCONFIGS='[["wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": true}]]'
for i in 1 2; do
  for p in L2_256B L2_128B NONE; do
    sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_$p,/" gemmlab/runner.py
    echo "== $p ($i)"
    [ $i = 1 ] && timeout 60 ncu --clock-control base -k 'regex:^gemm$' --metrics $M \
      python3 benchmarks/store-steps/ncu_launches.py 4096 tf32 2>&1 | grep -E "cycles|bytes|fabric" | head -4
    CASES=benchmarks/power-steps/cases17p.py timeout 100 python3 benchmarks/lean-steps/interleave.py 4 "$out/p-$p-$i.json" 2>&1 | tail -2
  done
done 2>&1 | tee "$out/promotion.txt"
git checkout gemmlab/runner.py
