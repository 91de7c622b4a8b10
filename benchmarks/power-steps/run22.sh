#!/bin/bash
# Run 22: prefetch.tensormap at the producer's start (TMAP_PREFETCH, a switch for this run): cycles at the base
# clock (ncu) and 12 interleaved rounds at 4096^3.
# Usage: bash benchmarks/power-steps/run22.sh OUTDIR
out=${1:?usage: run22.sh OUTDIR}
mkdir -p "$out"
M=gpu__time_duration.sum,sm__cycles_elapsed.max
for dt in bf16 tf32; do
  v=wgmma_tf32; [ $dt = bf16 ] && v=wgmma_ws
  XCONFIGS="[[\"$v\", {}], [\"$v\", {\"TMAP_PREFETCH\": true}], [\"$v\", {}], [\"$v\", {\"TMAP_PREFETCH\": true}]]" \
    timeout 120 ncu --clock-control base -k 'regex:^gemm$' --metrics $M \
    python3 benchmarks/store-steps/ncu_launches.py 4096 $dt > "$out/ncu-$dt.txt" 2>&1
  echo "== $dt 4096^3, base clock: off off on on off off on on"
  grep -E "cycles_elapsed" "$out/ncu-$dt.txt" | awk '{print $NF}' | paste -sd' '
done 2>&1 | tee "$out/ncu-summary.txt"
VARIANT=wgmma_ws python3 benchmarks/power-steps/check.py '{"TMAP_PREFETCH": true}' 2>&1 | tail -1
VARIANT=wgmma_tf32 python3 benchmarks/power-steps/check.py '{"TMAP_PREFETCH": true}' 2>&1 | tail -1
CASES=benchmarks/power-steps/cases22.py python3 benchmarks/lean-steps/interleave.py 12 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
