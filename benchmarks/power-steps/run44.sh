#!/bin/bash
# Run 44: cuBLAS's bf16 4096^3 kernel read instruction by instruction. ncu's source page prints the SASS of a
# kernel with each instruction's executions, which shows how nvjet's loop, copies and C store are made (its
# TMA loads and their multicast, its store instructions), beside wgmma_ws's. Then the L2 read count of
# wgmma_ws with CLUSTER_M = 1, which calibrates run 39's reading of the counters (expected 48 KB per block and
# K step, 50.3M sectors, against 33.6M with B shared).
# Usage: bash benchmarks/power-steps/run44.sh OUTDIR
out=${1:?usage: run44.sh OUTDIR}
mkdir -p "$out"
ncu --version | tail -1
XCONFIGS='[["wgmma_ws", {}]]' timeout 300 ncu --clock-control base -k 'regex:^gemm$|nvjet' -c 4 --section SourceCounters \
  -o "$out/sass" -f python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu-run.txt" 2>&1
tail -3 "$out/ncu-run.txt"
timeout 300 ncu -i "$out/sass.ncu-rep" --page source --print-source sass --csv > "$out/sass.csv" 2> "$out/sass.err"
wc -c "$out/sass.csv"; head -c 600 "$out/sass.err"
XCONFIGS='[["wgmma_ws", {"CLUSTER_M": 1}], ["wgmma_ws", {}]]' timeout 300 ncu --clock-control base -k 'regex:^gemm$' --metrics \
lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,sm__cycles_elapsed.max \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/l2.txt" 2>&1
grep -E "gemm|lts|cycles" "$out/l2.txt" | grep -v "==PROF==" | sed 's/  */ /g'
rm -f "$out/sass.ncu-rep"
gzip -f "$out/sass.csv"
