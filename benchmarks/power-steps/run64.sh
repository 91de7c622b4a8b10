#!/bin/bash
# Run 64: where a one-tile launch spends its time, instruction by instruction, in wgmma_ws and in cuBLAS's kernel:
# ncu's source page (SASS with stall samples) at 2048 x 2048 x 64 (one K step per tile: the start, one step, the C
# store and the end), two launches each. The CSV is summed by region in benchmarks/power-steps/regions.py.
# Usage: bash benchmarks/power-steps/run64.sh OUTDIR
out=${1:?usage: run64.sh OUTDIR}
mkdir -p "$out"
for s in 2048x2048x64 2048x2048x1024; do
  NLAUNCH=2 XCONFIGS='[["wgmma_ws", {}]]' timeout 200 ncu --clock-control base -k 'regex:^gemm$|nvjet' -c 4 --section SourceCounters \
    -o "$out/sass-$s" -f python3 benchmarks/store-steps/ncu_launches.py $s bf16 > "$out/ncu-run-$s.txt" 2>&1
  tail -1 "$out/ncu-run-$s.txt"
  timeout 200 ncu -i "$out/sass-$s.ncu-rep" --page source --print-source sass --csv > "$out/sass-$s.csv" 2> "$out/sass-$s.err"
  wc -c "$out/sass-$s.csv"; head -c 300 "$out/sass-$s.err"
  rm -f "$out/sass-$s.ncu-rep"; gzip -f "$out/sass-$s.csv"
done
