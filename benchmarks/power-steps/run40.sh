#!/bin/bash
# Run 40: one release per consumer warpgroup instead of one per warp (ws_wg: the empty barriers count CM x CWG
# arrivals, made by the warpgroup's first thread after its wgmma.wait_group, as CUTLASS's sm90 pipeline does):
# correctness (check.py), then 12 interleaved rounds against cuBLAS (cases40.py).
# Usage: bash benchmarks/power-steps/run40.sh OUTDIR
out=${1:?usage: run40.sh OUTDIR}
mkdir -p "$out" /tmp/k
git log -1 --format='commit %H' | tee "$out/check.txt"
sed -e 's/^name = "wgmma_ws"/name = "ws_wg"/' -e 's/bar_init(&empty\[s\], {{ CM \* CWG \* 4 }});/bar_init(\&empty[s], {{ CM * CWG }});/' \
    -e 's/&& lane == 0)$/\&\& threadIdx.x % 128 == 0)/' kernels/wgmma_ws.cu.j2 > /tmp/k/ws_wg.cu.j2
grep -n "bar_init(&empty\|threadIdx.x % 128 == 0)" /tmp/k/ws_wg.cu.j2 | tee -a "$out/check.txt"
export KDIRS=/tmp/k
VARIANT=ws_wg timeout 150 python3 benchmarks/power-steps/check.py >> "$out/check.txt" 2>&1
rc=$?; grep -v PASS "$out/check.txt" | tail -1
[ $rc = 124 ] && { echo "TIMEOUT"; exit 1; }
[ $rc = 0 ] || exit 1
CASES=benchmarks/power-steps/cases40.py timeout 300 python3 benchmarks/lean-steps/interleave.py 12 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
