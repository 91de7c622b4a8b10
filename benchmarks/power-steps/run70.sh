#!/bin/bash
# Run 70: every speed goal of issue 5 timed against cuBLAS once more, in ROUNDS interleaved rounds
# (cases70.py), with the card's clocks, power and temperature before and after.
# Usage: bash benchmarks/power-steps/run70.sh OUTDIR [ROUNDS]
out=${1:?usage: run70.sh OUTDIR [ROUNDS]}; rounds=${2:-30}
mkdir -p "$out"
q=name,serial,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu
nvidia-smi --query-gpu=$q --format=csv > "$out/card.txt"
CASES=benchmarks/power-steps/cases70.py timeout 560 python3 benchmarks/lean-steps/interleave.py "$rounds" \
  "$out/inter70.json" > "$out/inter70.txt" 2>&1
nvidia-smi --query-gpu=$q --format=csv,noheader >> "$out/card.txt"
python3 -c "import json, sys; bad = [r for r in json.load(open(sys.argv[1]))['log'] if not r['ok']]; print(len(bad), 'results failed their check', bad[:3])" "$out/inter70.json" >> "$out/inter70.txt"
cat "$out/card.txt" "$out/inter70.txt"
