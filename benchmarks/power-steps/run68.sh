#!/bin/bash
# Run 68, on a machine other than run 67's, at the commit of run 67's kernels: compute-sanitizer's memcheck,
# racecheck and synccheck over wgmma_ws and wgmma_tf32 on odd shapes, run 67's interleaved rounds again, and
# every GPU test. Usage: bash benchmarks/power-steps/run68.sh OUTDIR REV
out=${1:?usage: run68.sh OUTDIR REV}; rev=${2:?usage: run68.sh OUTDIR REV}
mkdir -p "$out"
for v in "wgmma_ws bf16" "wgmma_tf32 tf32"; do
  set -- $v
  f="$out/sanitize-$1.txt"
  echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader), $(date +%F), run 68 of benchmarks/h100-power-experiments.txt" > "$f"
  for t in "memcheck 2100 2000 72" "racecheck 600 264 104" "synccheck 600 264 104"; do
    set -- $v $t
    echo "\$ gemmlab run --variant $1 --dtype $2 -M $4 -N $5 -K $6 --sanitize $3 --seed 1" >> "$f"
    timeout 120 gemmlab run --variant $1 --dtype $2 -M $4 -N $5 -K $6 --sanitize $3 --seed 1 2>&1 | tail -2 >> "$f"
  done
  grep -E "SUMMARY" "$f"
done
bash benchmarks/power-steps/run67.sh "$out" "$rev" rounds 12
timeout 420 python3 -m pytest -q -m gpu tests/ > "$out/pytest.txt" 2>&1; tail -1 "$out/pytest.txt"
