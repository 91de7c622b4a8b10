#!/bin/bash
# Run 60 (tables60.py, cases60.py): single blocks (CLUSTER_M=1) in a GPC order, where B's loads are plain too and can
# merge: the classes table (A shared within a GPC) and TABLE1=consec (B shared 8 ways, A 2), against the default
# (2-block clusters in GPC order). ncu at the base clock (merged sectors, L2 reads, cycles), then interleaved rounds.
# Usage: bash benchmarks/power-steps/run60.sh OUTDIR [ROUNDS]
out=${1:?usage: run60.sh OUTDIR [ROUNDS]}
mkdir -p "$out"
for t in classes consec; do
  TABLE1=$t NCU=1 XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"CLUSTER_M": 1}]]' timeout 200 ncu --clock-control base -k 'regex:^gemm$' --metrics \
  lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__cycles_elapsed.max \
    python3 benchmarks/power-steps/tables60.py 4096 bf16 > "$out/ncu-$t.txt" 2>&1
  echo "TABLE1=$t"; grep -E "lrc|lts|dram|cycles" "$out/ncu-$t.txt" | grep -v "==PROF==" | sed 's/  */ /g'
done
for t in classes consec; do
  TABLE1=$t CASES=benchmarks/power-steps/cases60.py timeout 300 python3 benchmarks/power-steps/tables60.py ${2:-12} "$out/interleave-$t.json" > "$out/interleave-$t.txt" 2>&1
  echo "TABLE1=$t"; tail -6 "$out/interleave-$t.txt"
done
