#!/bin/bash
# Run 31: DRAIN (C handed to two producer warps through a shared-memory stash, written while the consumers go on
# with the next tile): correctness (check.py), then 8 interleaved rounds against cuBLAS (cases31.py).
# (A first version, at 4fdfa79, hung on its first launch: chunks shared a slot's barriers, whose parity cannot tell
# a use from the one two before it when two warps race for the slot; now each chunk has its own barriers. A second,
# at 8285010, hung too: the consumers' setmaxnreg.inc asked for more registers than the producer's dec gave back.)
# Usage: bash benchmarks/power-steps/run31.sh OUTDIR
out=${1:?usage: run31.sh OUTDIR}
mkdir -p "$out"
git log -1 --format='commit %H' | tee "$out/check.txt"
for cfg in '{"DRAIN": true}' '{"DRAIN": true, "DCH": 1}' '{"DRAIN": true, "STAGES": 3, "DCH": 4}'; do
  timeout 120 python3 benchmarks/power-steps/check.py "$cfg" >> "$out/check.txt" 2>&1
  rc=$?; grep -v PASS "$out/check.txt" | tail -2
  [ $rc = 124 ] && { echo "TIMEOUT: $cfg"; exit 1; }
done
CASES=benchmarks/power-steps/cases31.py timeout 300 python3 benchmarks/lean-steps/interleave.py 8 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
