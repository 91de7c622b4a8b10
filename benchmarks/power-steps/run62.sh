#!/bin/bash
# Run 62 (timeline.patch with RELAXED's producer tail, cases62.py): RELAXED and SCALE_D, each and together, and with
# EARLY. Correctness on check.py's 12 shapes, ncu's cycles at the base clock (4096^3 and 2048 x 2048 x 1024, where the
# start and end weigh most), the timeline, then interleaved rounds against cuBLAS.
# Usage: bash benchmarks/power-steps/run62.sh OUTDIR [ROUNDS]
out=${1:?usage: run62.sh OUTDIR [ROUNDS]}
mkdir -p "$out" /tmp/k
git show c2c5bab:kernels/wgmma_ws.cu.j2 > /tmp/k/ws_t.cu.j2 && patch -s /tmp/k/ws_t.cu.j2 benchmarks/power-steps/timeline.patch || exit 1  # the template before run 66
export KDIRS=/tmp/k
. benchmarks/power-steps/ncu_cycles.sh
RS='"RELAXED": true, "SCALE_D": true'
VARIANT=ws_t timeout 150 python3 benchmarks/power-steps/check.py "{$RS}" "{\"EARLY\": true, $RS}" > "$out/check.txt" 2>&1
grep -c PASS "$out/check.txt"; tail -1 "$out/check.txt"
for s in 4096 2048x2048x1024; do
  echo "== $s: wgmma_ws, RELAXED, SCALE_D, both, EARLY + both, wgmma_ws (3 launches each), cuBLAS"
  NLAUNCH=3 XCONFIGS="[[\"wgmma_ws\", {}], [\"ws_t\", {\"RELAXED\": true}], [\"ws_t\", {\"SCALE_D\": true}], [\"ws_t\", {$RS}], [\"ws_t\", {\"EARLY\": true, $RS}], [\"wgmma_ws\", {}]]" NCU_TIMEOUT=150 ncu_cycles "$out/ncu-$s.txt" $s
done
timeout 100 python3 benchmarks/power-steps/timeline.py "$out/timeline.json" '{}' "{$RS}" "{\"EARLY\": true, $RS}" \
  > "$out/timeline.txt" 2>&1; tail -4 "$out/timeline.txt"
CASES=benchmarks/power-steps/cases62.py timeout 300 python3 benchmarks/lean-steps/interleave.py ${2:-16} "$out/interleave.json" \
  > "$out/interleave.txt" 2>&1; tail -7 "$out/interleave.txt"
