#!/bin/bash
# Run 39: where wgmma_ws's L2 traffic exceeds cuBLAS's kernel's at bf16 4096^3 (1.35 against 1.15 GB in run 8):
# ncu at the base clock, L2 sectors by source unit and operation, one launch each after one warm-up.
# Usage: bash benchmarks/power-steps/run39.sh OUTDIR
out=${1:?usage: run39.sh OUTDIR}
mkdir -p "$out"
XCONFIGS='[["wgmma_ws", {}]]' timeout 300 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
lts__t_bytes.sum,lts__t_sectors.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,\
lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,\
lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum,lts__t_requests_srcunit_tex.sum,dram__bytes_read.sum,dram__bytes_write.sum,\
sm__cycles_elapsed.max,smsp__inst_executed.sum \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu.txt" 2>&1
grep -E "^  [a-z]|gemm|nvjet|lts|dram|cycles|inst_" "$out/ncu.txt" | grep -v "==PROF==" | sed 's/  */ /g'
