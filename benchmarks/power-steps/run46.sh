#!/bin/bash
# Run 46: where cuBLAS's 1% fewer cycles and 16% fewer L2 reads come from (bf16 4096^3, ncu at the base clock).
# 1. Per-SM active cycles and tensor-pipe cycles (min/avg/max over SMs) of wgmma_ws and cuBLAS's kernel: is the
#    difference in every SM's time (the tiles) or in the slowest SM's (the tail)?
# 2. L2 reads from the SMs by tile order and cluster shape: without clusters wgmma_ws reads 35-37M sectors where
#    its tiles need 50.3M (run 44), so loads of the same lines by two SMs at the same moment seem to be served
#    once. If so, the tile order decides which loads meet: GROUP_M 1 puts clusters that share A next to each
#    other, GROUP_M 8 and 16 clusters that share B.
# Usage: bash benchmarks/power-steps/run46.sh OUTDIR
out=${1:?usage: run46.sh OUTDIR}
mkdir -p "$out"
ncu --query-metrics --chip gh100 > "$out/metrics.txt" 2>&1
echo "metrics listed: $(wc -l < "$out/metrics.txt")"; grep -iE "^(lrc|sm__pipe_tensor_op_gmma|sm__inst_executed_pipe_tensor_op_gmma)" "$out/metrics.txt" | cut -c1-150
gm=""; for m in sm__pipe_tensor_op_gmma_cycles_active sm__pipe_tensor_op_hmma_cycles_active; do
  grep -q "^$m " "$out/metrics.txt" && gm="$gm,$m.min,$m.avg,$m.max"; done
lrc=$(grep -oE "^lrc__[a-z0-9_]*(sectors|requests)[a-z0-9_]*" "$out/metrics.txt" | head -6 | sed 's/$/.sum/' | paste -sd, -)
echo "tensor metrics: ${gm:-none}   lrc metrics: ${lrc:-none}"
XCONFIGS='[["wgmma_ws", {}]]' timeout 300 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max$gm \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/sm.txt" 2>&1
grep -E "^  [a-z]|gemm|nvjet|sm__|gpu__" "$out/sm.txt" | grep -v "==PROF==" | sed 's/  */ /g'
XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"GROUP_M": 1}], ["wgmma_ws", {"GROUP_M": 16}], ["wgmma_ws", {"CLUSTER_M": 1}], ["wgmma_ws", {"CLUSTER_M": 1, "GROUP_M": 1}]]' \
timeout 400 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,sm__cycles_elapsed.max${lrc:+,$lrc} \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/l2.txt" 2>&1
grep -E "^[a-z_]+ \{|^  [a-z]|gemm|nvjet|lts|dram|cycles|lrc" "$out/l2.txt" | grep -v "==PROF==" | sed 's/  */ /g'
gzip -f "$out/metrics.txt"
