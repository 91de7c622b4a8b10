#!/bin/bash
# Run 66 (cases66.py): wgmma_ws with the start and end of runs 61-65 made its own (relaxed cluster barriers, the
# maps prefetched, the slot by the block's own SM with the pair checked by st.async, scale-d for a tile's first
# product, the producer's tail), against ws_old, the template before (git show REV:kernels/wgmma_ws.cu.j2, REV
# given, renamed): the GPU tests of the tensor rungs and the GPC order, check.py's 12 shapes in three settings,
# ncu's cycles at the base clock, then interleaved rounds against cuBLAS.
# Usage: bash benchmarks/power-steps/run66.sh OUTDIR REV [ROUNDS]
out=${1:?usage: run66.sh OUTDIR REV [ROUNDS]}; rev=${2:?usage: run66.sh OUTDIR REV [ROUNDS]}
mkdir -p "$out" /tmp/k
git show "$rev:kernels/wgmma_ws.cu.j2" 2>/dev/null | sed 's/^name = "wgmma_ws"/name = "ws_old"/; s/^parent = "wgmma"/parent = "wgmma_ws"/' > /tmp/k/ws_old.cu.j2
[ -s /tmp/k/ws_old.cu.j2 ] || cp "benchmarks/power-steps/ws_old-$rev.cu.j2" /tmp/k/ws_old.cu.j2
timeout 240 python3 -m pytest -q tests/test_tensor.py tests/test_gpc.py > "$out/pytest.txt" 2>&1; tail -1 "$out/pytest.txt"
timeout 150 python3 benchmarks/power-steps/check.py '{}' '{"GPC_ORDER": false}' '{"CLUSTER_M": 1}' > "$out/check.txt" 2>&1
grep -c PASS "$out/check.txt"; tail -1 "$out/check.txt"
export KDIRS=/tmp/k
. benchmarks/power-steps/ncu_cycles.sh
for s in 2048x2048x64 4096x4096x64 4096; do
  echo "== $s: ws_old, wgmma_ws, ws_old, wgmma_ws (3 launches each), cuBLAS"
  NLAUNCH=3 XCONFIGS='[["ws_old", {}], ["wgmma_ws", {}], ["ws_old", {}], ["wgmma_ws", {}]]' NCU_TIMEOUT=120 ncu_cycles "$out/ncu-$s.txt" $s
done
[ "${3:-12}" = 0 ] && exit 0
CASES=benchmarks/power-steps/cases66.py timeout 300 python3 benchmarks/lean-steps/interleave.py ${3:-12} "$out/interleave.json" \
  > "$out/interleave.txt" 2>&1; tail -11 "$out/interleave.txt"
