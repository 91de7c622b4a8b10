#!/bin/bash
# Run 48: single blocks in GROUP_M 16 against 2-block clusters in GROUP_M 8. Runs 46-47 found that the L2 request
# coalescer serves two plain loads of the same sectors once when they come from the two SMs of one TPC (blocks
# 2i and 2i+1 of a grid without clusters land there, placement.py), about half of the time. Without clusters,
# blocks 2i and 2i+1 take vertically adjacent tiles, which need the same B tile, so the hardware shares B between
# them much as the cluster's multicast does, without tying the two blocks' rings together. GROUP_M 16 of 128-row
# tiles walks the 2048 rows that GROUP_M 8 of 256-row cluster tiles does, so DRAM should read as little.
# ncu at the base clock (L2, DRAM, coalescing), then interleaved rounds with cuBLAS at the free clock.
# Usage: bash benchmarks/power-steps/run48.sh OUTDIR [ROUNDS]
out=${1:?usage: run48.sh OUTDIR [ROUNDS]}
mkdir -p "$out"
XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"CLUSTER_M": 1, "GROUP_M": 16}]]' timeout 300 ncu --clock-control base -k 'regex:^gemm$' --metrics \
dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,sm__cycles_elapsed.max \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu.txt" 2>&1
grep -E "^wgmma|^  [a-z]|gemm|lts|lrc|dram|cycles" "$out/ncu.txt" | grep -v "==PROF==" | sed 's/  */ /g'
CASES=benchmarks/power-steps/cases48.py timeout 480 python3 benchmarks/lean-steps/interleave.py ${2:-12} "$out/interleave.json" > "$out/interleave.txt" 2>&1
tail -8 "$out/interleave.txt"
