#!/bin/bash
# Run 67 (cases67.py): a tile's first product with scale-d off (d = A * B, the accumulators not zeroed
# between tiles, the first K step taken out of the loop) in wgmma_ws, and in wgmma_tf32 that and wgmma_ws's
# start and end of run 66; against ws_old and tf32_old, the templates at REV (renamed; tf32_old's cluster_sync,
# gone from hopper.j2, written out as the barrier it was): the GPU tests of the tensor rungs and the GPC order,
# check.py's 12 shapes and ncu's cycles at the base clock (PART checks), or interleaved rounds against cuBLAS
# (PART rounds, ROUNDS of them), each within one device call's 10 minutes.
# Usage: bash benchmarks/power-steps/run67.sh OUTDIR REV checks|rounds [ROUNDS]
usage="usage: run67.sh OUTDIR REV checks|rounds [ROUNDS]"
out=${1:?$usage}; rev=${2:?$usage}; part=${3:?$usage}
mkdir -p "$out" /tmp/k
git show "$rev:kernels/wgmma_ws.cu.j2" | sed 's/^name = "wgmma_ws"/name = "ws_old"/; s/^parent = "wgmma"/parent = "wgmma_ws"/' > /tmp/k/ws_old.cu.j2
git show "$rev:kernels/wgmma_tf32.cu.j2" | sed 's/^name = "wgmma_tf32"/name = "tf32_old"/; s/^parent = "wgmma_ws"/parent = "wgmma_tf32"/;
  s/cluster_sync();/asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;" ::: "memory");/' > /tmp/k/tf32_old.cu.j2
if [ "$part" = rounds ]; then
  CASES=benchmarks/power-steps/cases67.py KDIRS=/tmp/k timeout 500 python3 benchmarks/lean-steps/interleave.py ${4:-12} \
    "$out/interleave.json" > "$out/interleave.txt" 2>&1; tail -11 "$out/interleave.txt"
  exit 0
fi
timeout 300 python3 -m pytest -q tests/test_tensor.py tests/test_gpc.py > "$out/pytest.txt" 2>&1; tail -1 "$out/pytest.txt"
timeout 150 python3 benchmarks/power-steps/check.py '{}' '{"GPC_ORDER": false}' '{"CLUSTER_M": 1}' > "$out/check.txt" 2>&1
VARIANT=wgmma_tf32 timeout 100 python3 benchmarks/power-steps/check.py '{}' '{"CLUSTER_N": 1}' >> "$out/check.txt" 2>&1
grep -c PASS "$out/check.txt"; grep -v PASS "$out/check.txt" | tail -3
export KDIRS=/tmp/k
. benchmarks/power-steps/ncu_cycles.sh
for s in 2048x2048x64 4096; do
  echo "== bf16 $s: ws_old, wgmma_ws, ws_old, wgmma_ws (3 launches each), cuBLAS"
  NLAUNCH=3 XCONFIGS='[["ws_old", {}], ["wgmma_ws", {}], ["ws_old", {}], ["wgmma_ws", {}]]' NCU_TIMEOUT=100 ncu_cycles "$out/ncu-$s.txt" $s
done
echo "== tf32 4096: tf32_old, wgmma_tf32, tf32_old, wgmma_tf32 (3 launches each), cuBLAS"
NCU_DTYPE=tf32 NLAUNCH=3 XCONFIGS='[["tf32_old", {}], ["wgmma_tf32", {}], ["tf32_old", {}], ["wgmma_tf32", {}]]' NCU_TIMEOUT=100 \
  ncu_cycles "$out/ncu-tf32-4096.txt" 4096 'regex:^gemm$|xmma|nvjet|cutlass'
