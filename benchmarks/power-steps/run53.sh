#!/bin/bash
# Run 53: is cuBLAS's fp16 kernel its bf16 one? Against cuBLAS, wgmma_ws measures ~0.99 at bf16 4096^3 and ~1.00
# at fp16: cuBLAS's bf16 is ~6% faster than its fp16, ours ~3%. Kernel names and cycles at the base clock, both
# dtypes, ours and cuBLAS's (two launches each), then the same at the free clock (time only).
# Usage: bash benchmarks/power-steps/run53.sh OUTDIR
out=${1:?usage: run53.sh OUTDIR}
mkdir -p "$out"
for cc in base none; do
for dt in bf16 fp16; do
  XCONFIGS='[["wgmma_ws", {}]]' timeout 200 ncu --clock-control $cc -k 'regex:^gemm$|nvjet' --metrics \
sm__cycles_elapsed.max,gpu__time_duration.sum,sm__inst_executed.sum,smsp__cycles_active.avg \
    python3 benchmarks/store-steps/ncu_launches.py 4096 $dt > "$out/ncu-$dt-$cc.txt" 2>&1
  echo "== $dt clock $cc"
  grep -E "^  [a-z_]+.*\(|gemm|nvjet|cycles|duration|inst" "$out/ncu-$dt-$cc.txt" | grep -v "==PROF==" | sed 's/  */ /g'
done
done
