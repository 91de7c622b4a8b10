#!/bin/bash
# Run 47: the L2 request coalescer (LRC) counters that run 46's metric list showed. The LRC sits between the
# crossbar and the L2 slices and serves reads of the same sectors once: for multicast ("programmatic") and,
# it seems, for plain loads that meet ("hardware"). Which kind gives cuBLAS's kernel its 14% fewer L2 reads?
# Usage: bash benchmarks/power-steps/run47.sh OUTDIR
out=${1:?usage: run47.sh OUTDIR}
mkdir -p "$out"
m=""; for c in xbar2lrc_requests_op_read request_sectors_op_read_coalescable request_sectors_op_read_coalescing_achieved_type_hardware \
  request_sectors_op_read_coalescing_achieved_type_programmatic request_sectors_op_read_coalescing_type_programmatic lts2lrc_sectors_op_read \
  lrc2xbar_sectors_op_read lrc2xbar_sectors_op_read_coalescing_achieved_type_hardware lrc2xbar_sectors_op_read_coalescing_achieved_type_programmatic \
  lrc2xbar_sectors_op_read_coalescing_none xbar2gpc_sectors_op_read xbar2gpc_sectors_op_read_coalescing_achieved_type_hardware \
  xbar2gpc_sectors_op_read_coalescing_achieved_type_programmatic xbar2lrc_requests_op_read_coalescing_type_programmatic_size_32B \
  xbar2lrc_requests_op_read_coalescing_type_programmatic_size_128B; do m="$m,lrc__$c.sum"; done
XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"GROUP_M": 1}], ["wgmma_ws", {"CLUSTER_M": 1}], ["wgmma_ws", {"CLUSTER_M": 1, "GROUP_M": 1}]]' \
timeout 400 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_elapsed.max$m \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/lrc.txt" 2>&1
grep -E "^  [a-z]|gemm|nvjet|lts|lrc|cycles|rror" "$out/lrc.txt" | grep -v "==PROF==" | sed 's/  */ /g'
