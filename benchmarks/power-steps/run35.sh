#!/bin/bash
# Run 35: where OVERLAP's cycles go: ncu at the base clock and at the free clock, bf16 4096^3, wgmma_ws with
# OVERLAP 0, 2 and 3 and cuBLAS (2 launches each): time, cycles, SM clock, tensor-pipe activity, instructions.
# Usage: bash benchmarks/power-steps/run35.sh OUTDIR
out=${1:?usage: run35.sh OUTDIR}
mkdir -p "$out"
export XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"OVERLAP": 2}], ["wgmma_ws", {"OVERLAP": 3}]]'
for cc in base none; do
  echo "== clock-control $cc" >> "$out/ncu.txt"
  timeout 240 ncu --clock-control $cc -k 'regex:^gemm$|nvjet' --metrics \
    gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
    python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 >> "$out/ncu.txt" 2>&1
done
grep -E "^  [a-z_]+.*\(|gemm|nvjet|== clock|duration|cycles|inst_|pct|wavefronts|per_second|\{" "$out/ncu.txt" | grep -v "==PROF==" | sed 's/  */ /g' | head -120
