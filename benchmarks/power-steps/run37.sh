#!/bin/bash
# Run 37: wgmma_ws's consumer loop in fewer instructions (the ring's stage and parity carried along instead of
# divided out of a step count; descriptors made once and added to) against the loop before it (ws_old, the
# template of fb95271): correctness (check.py), ncu at the base clock (instructions, cycles), then 10 interleaved
# rounds against cuBLAS (cases37.py).
# Usage: bash benchmarks/power-steps/run37.sh OUTDIR
out=${1:?usage: run37.sh OUTDIR}
mkdir -p "$out" /tmp/k
git log -1 --format='commit %H' | tee "$out/check.txt"
git show fb95271:kernels/wgmma_ws.cu.j2 | sed 's/^name = "wgmma_ws"/name = "ws_old"/' > /tmp/k/ws_old.cu.j2
export KDIRS=/tmp/k
timeout 150 python3 benchmarks/power-steps/check.py >> "$out/check.txt" 2>&1
rc=$?; grep -v PASS "$out/check.txt" | tail -2
[ $rc = 124 ] && { echo "TIMEOUT"; exit 1; }
XCONFIGS='[["ws_old", {}], ["wgmma_ws", {}]]' timeout 200 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
  gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu.txt" 2>&1
grep -E "gemm|nvjet|duration|elapsed|inst_" "$out/ncu.txt" | grep -v "==PROF==" | sed 's/  */ /g'
CASES=benchmarks/power-steps/cases37.py timeout 330 python3 benchmarks/lean-steps/interleave.py 10 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
