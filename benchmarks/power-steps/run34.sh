#!/bin/bash
# Run 34: OVERLAP (a tile's first and last K steps done a half tile at a time, so that each half of the C store
# overlaps the other half's products): correctness (check.py), then 8 interleaved rounds against cuBLAS (cases34.py).
# Usage: bash benchmarks/power-steps/run34.sh OUTDIR
out=${1:?usage: run34.sh OUTDIR}
mkdir -p "$out"
git log -1 --format='commit %H' | tee "$out/check.txt"
for cfg in '{"OVERLAP": 2}' '{"OVERLAP": 1}' '{"OVERLAP": 3}'; do
  timeout 150 python3 benchmarks/power-steps/check.py "$cfg" >> "$out/check.txt" 2>&1
  rc=$?; grep -v PASS "$out/check.txt" | tail -2
  [ $rc = 124 ] && { echo "TIMEOUT: $cfg"; exit 1; }
done
CASES=benchmarks/power-steps/cases34.py timeout 300 python3 benchmarks/lean-steps/interleave.py 8 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
