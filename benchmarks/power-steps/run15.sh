#!/bin/bash
# Run 15: wgmma_tf32 with B^T's fragments loaded as float2 pairs (PAIRS) and without rounding (NOCVT):
# correctness, shared-memory wavefronts and bank conflicts (ncu), 12 interleaved rounds, sustained clock.
# Usage: bash benchmarks/power-steps/run15.sh OUTDIR
out=${1:?usage: run15.sh OUTDIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee "$out/gpu.txt"
VARIANT=wgmma_tf32 python3 benchmarks/power-steps/check.py '{"PAIRS": true}' '{"PAIRS": true, "NOCVT": true}' 2>&1 | tee "$out/check.txt"
export XCONFIGS='[["wgmma_tf32", {}], ["wgmma_tf32", {"PAIRS": true}], ["wgmma_tf32", {"PAIRS": true, "NOCVT": true}]]'
timeout 240 ncu --clock-control base -k 'regex:^gemm$|xmma|nvjet|cutlass' --metrics \
  sm__cycles_elapsed.max,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed_op_shared_ld.sum,lts__t_bytes.sum,dram__bytes_read.sum \
  python3 benchmarks/store-steps/ncu_launches.py 4096 tf32 > "$out/ncu.txt" 2>&1
grep -E "^  [a-zA-Z_]+.*\(|cycles|inst_|bytes|wavefronts|conflicts" "$out/ncu.txt" | grep -v "==PROF==" | head -80
CASES=benchmarks/power-steps/cases15.py python3 benchmarks/lean-steps/interleave.py 12 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
CASES=benchmarks/power-steps/cases15.py timeout 150 python3 benchmarks/power-steps/energy.py 2 "$out/energy.json" 2>&1 | tee "$out/energy.txt"
