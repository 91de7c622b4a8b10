#!/bin/bash
# Run 31: DRAIN (C handed to two producer warps through a shared-memory stash, written while the consumers go on
# with the next tile): correctness (check.py), then 8 interleaved rounds against cuBLAS (cases31.py).
# Usage: bash benchmarks/power-steps/run31.sh OUTDIR
out=${1:?usage: run31.sh OUTDIR}
mkdir -p "$out"
git log -1 --format='commit %H' | tee "$out/check.txt"
python3 benchmarks/power-steps/check.py '{"DRAIN": true}' '{"DRAIN": true, "DCH": 1}' '{"DRAIN": true, "STAGES": 3, "DCH": 4}' 2>&1 \
  | tee -a "$out/check.txt" | grep -v PASS
CASES=benchmarks/power-steps/cases31.py python3 benchmarks/lean-steps/interleave.py 8 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
