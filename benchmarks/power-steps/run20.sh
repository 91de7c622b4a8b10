#!/bin/bash
# Run 20: cycles at free clocks (ncu --clock-control none, caches flushed before each kernel as ncu does) and at
# the base clock, ours against cuBLAS, tf32 and bf16 at 4096^3: does our kernel need more cycles than cuBLAS's
# when the clock is high?
# Usage: bash benchmarks/power-steps/run20.sh OUTDIR
out=${1:?usage: run20.sh OUTDIR}
mkdir -p "$out"
M=gpu__time_duration.sum,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second
for cc in none base; do
  for dt in tf32 bf16; do
    v=wgmma_tf32; [ $dt = bf16 ] && v=wgmma_ws
    XCONFIGS="[[\"$v\", {}], [\"$v\", {}]]" timeout 120 ncu --clock-control $cc -k 'regex:^gemm$|xmma|nvjet' --metrics $M \
      python3 benchmarks/store-steps/ncu_launches.py 4096 $dt > "$out/ncu-$cc-$dt.txt" 2>&1
    echo "== clock $cc, $dt 4096^3"
    grep -E "^  [a-zA-Z_0-9]+.*\(|duration|cycles|per_second" "$out/ncu-$cc-$dt.txt" | grep -v "==PROF==" | sed 's/(.*//' | grep -v "^  sm80" | paste - - - - | grep -v "sm80"
  done
done 2>&1 | tee "$out/summary.txt"
