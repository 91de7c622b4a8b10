#!/bin/bash
# Run 61 (timeline.patch, timeline.py, cases61.py): wgmma_ws's time outside its K loops, block by block, and changes
# there: EARLY (tensor maps prefetched on entry, the GPC slot taken by the block's own SM before the cluster
# barrier), EARLY2 (with EARLY: the producer's first STAGES copies, B without multicast, go out before the cluster
# barrier), RELAXED (the last cluster barrier without MEMBAR.GPU), SCALE_D (a piece's first wgmma ignores the
# accumulators instead of zeroing them). Correctness, the timeline, ncu's cycles at the base clock, then
# interleaved rounds against cuBLAS.
# Usage: bash benchmarks/power-steps/run61.sh OUTDIR [ROUNDS]   (ROUNDS=0: no interleaved rounds; SKIP=1: only them)
out=${1:?usage: run61.sh OUTDIR [ROUNDS]}
mkdir -p "$out" /tmp/k
git show c2c5bab:kernels/wgmma_ws.cu.j2 > /tmp/k/ws_t.cu.j2 && patch -s /tmp/k/ws_t.cu.j2 benchmarks/power-steps/timeline.patch || exit 1  # the template before run 66
export KDIRS=/tmp/k
. benchmarks/power-steps/ncu_cycles.sh
E2='"EARLY": true, "EARLY2": true'
if [ -z "$SKIP" ]; then
VARIANT=ws_t timeout 200 python3 benchmarks/power-steps/check.py "{$E2}" "{$E2, \"RELAXED\": true, \"SCALE_D\": true}" \
  "{$E2, \"GPC_ORDER\": false}" > "$out/check.txt" 2>&1; grep -c PASS "$out/check.txt"; tail -1 "$out/check.txt"
timeout 120 python3 benchmarks/power-steps/timeline.py "$out/timeline.json" '{}' "{$E2}" "{$E2, \"RELAXED\": true, \"SCALE_D\": true}" \
  > "$out/timeline.txt" 2>&1; tail -9 "$out/timeline.txt"
for s in 4096 2048x2048x1024; do
  echo "== $s: wgmma_ws x3, EARLY2 x3, EARLY2+RELAXED+SCALE_D x3, wgmma_ws x3, cuBLAS x3"
  NLAUNCH=3 XCONFIGS="[[\"wgmma_ws\", {}], [\"ws_t\", {$E2}], [\"ws_t\", {$E2, \"RELAXED\": true, \"SCALE_D\": true}], [\"wgmma_ws\", {}]]" NCU_TIMEOUT=150 ncu_cycles "$out/ncu-$s.txt" $s
done
fi
[ "${2:-12}" = 0 ] && exit 0
CASES=benchmarks/power-steps/cases61.py timeout 400 python3 benchmarks/lean-steps/interleave.py ${2:-12} "$out/interleave.json" \
  > "$out/interleave.txt" 2>&1; tail -7 "$out/interleave.txt"
