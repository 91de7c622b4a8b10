#!/bin/bash
# Run 65 (timeline.patch, cases65.py): EARLY3, the start as cuBLAS's kernel makes it (run 64): the cluster barrier
# arrives relaxed right after the barriers are made (no MEMBAR.GPU), and the blocks of a cluster check their SM
# pair by sending each other their SM with st.async; with EARLY (maps prefetched on entry, slot by the block's own
# SM), RELAXED and SCALE_D. Correctness on check.py's 12 shapes, ncu's cycles at the base clock where the start
# weighs most (one K step per tile) and at 4096^3, the timeline, then interleaved rounds against cuBLAS.
# Usage: bash benchmarks/power-steps/run65.sh OUTDIR [ROUNDS]
out=${1:?usage: run65.sh OUTDIR [ROUNDS]}
mkdir -p "$out" /tmp/k
git show c2c5bab:kernels/wgmma_ws.cu.j2 > /tmp/k/ws_t.cu.j2 && patch -s /tmp/k/ws_t.cu.j2 benchmarks/power-steps/timeline.patch || exit 1  # the template before run 66
export KDIRS=/tmp/k
. benchmarks/power-steps/ncu_cycles.sh
E3='"EARLY": true, "EARLY3": true'
ALL="$E3, \"RELAXED\": true, \"SCALE_D\": true"
VARIANT=ws_t timeout 150 python3 benchmarks/power-steps/check.py "{$E3}" "{$ALL}" > "$out/check.txt" 2>&1
grep -c PASS "$out/check.txt"; tail -1 "$out/check.txt"
for s in 2048x2048x64 4096x4096x64 4096; do
  echo "== $s: wgmma_ws, EARLY + EARLY3, and + RELAXED + SCALE_D (3 launches each), cuBLAS"
  NLAUNCH=3 XCONFIGS="[[\"wgmma_ws\", {}], [\"ws_t\", {$E3}], [\"ws_t\", {$ALL}]]" NCU_TIMEOUT=120 ncu_cycles "$out/ncu-$s.txt" $s
done
for s in 2048x2048x64 4096; do
  SHAPE=$s timeout 90 python3 benchmarks/power-steps/timeline.py "$out/timeline-$s.json" '{}' "{$E3}" "{$ALL}" > "$out/timeline-$s.txt" 2>&1
  echo "== $s"; tail -4 "$out/timeline-$s.txt"
done
CASES=benchmarks/power-steps/cases65.py timeout 240 python3 benchmarks/lean-steps/interleave.py ${2:-16} "$out/interleave.json" \
  > "$out/interleave.txt" 2>&1; tail -5 "$out/interleave.txt"
