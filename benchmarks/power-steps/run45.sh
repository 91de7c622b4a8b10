#!/bin/bash
# Run 45: STAGGER. At 4096^3 every block ends its tiles at the same moment and all 132 write C at once, which
# the clock probe (run 30) saw cost 5.4K cycles a tile against 4.6K when half the SMs store. With STAGGER, half
# of the clusters take one tile of the last wave each and the other half share out the rest by K steps before
# their whole tiles, so that their tiles end between the others'. The streamed pieces now come first for plain
# stream-K too (8192^3). ws_old is the template and stream_k.j2 of 21c475d. Needs stagger.patch applied over 21c475d.
# Correctness (check.py, with STAGGER and as is, plus 4096^3 without clusters), then interleaved rounds.
# Usage: bash benchmarks/power-steps/run45.sh OUTDIR [ROUNDS]
out=${1:?usage: run45.sh OUTDIR [ROUNDS]}
mkdir -p "$out"
mkdir -p /tmp/k && git show 21c475d:kernels/stream_k.j2 > /tmp/k/stream_k_old.j2
git show 21c475d:kernels/wgmma_ws.cu.j2 | sed -e 's/^name = "wgmma_ws"/name = "ws_old"/' -e 's/{% include "stream_k.j2" %}/{% include "stream_k_old.j2" %}/' > /tmp/k/ws_old.cu.j2
export KDIRS=/tmp/k
git log -1 --format='commit %H' > "$out/check.txt" 2>/dev/null; git status --short >> "$out/check.txt" 2>/dev/null
timeout 240 python3 benchmarks/power-steps/check.py '{}' '{"STAGGER": true}' '{"STAGGER": true, "CLUSTER_M": 1}' >> "$out/check.txt" 2>&1
rc=$?; grep -v PASS "$out/check.txt" | tail -3
[ $rc = 124 ] && { echo "TIMEOUT"; exit 1; }
[ $rc = 0 ] || exit 1
CASES=benchmarks/power-steps/cases45.py timeout 420 python3 benchmarks/lean-steps/interleave.py ${2:-12} "$out/interleave.json" > "$out/interleave.txt" 2>&1
tail -12 "$out/interleave.txt"
