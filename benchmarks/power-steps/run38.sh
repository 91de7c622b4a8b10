#!/bin/bash
# Run 38: wgmma_ws's K step in 46 instructions (barrier addresses made once, the A descriptor in a uniform
# register) against the template of fb95271 (ws_old, 103): the tensor rungs' GPU tests, correctness (check.py),
# ncu at the base clock, then 16 interleaved rounds against cuBLAS (cases38.py).
# Usage: bash benchmarks/power-steps/run38.sh OUTDIR
out=${1:?usage: run38.sh OUTDIR}
mkdir -p "$out" /tmp/k
git log -1 --format='commit %H' | tee "$out/check.txt"
timeout 200 python3 -m pytest -q -m gpu tests/test_tensor.py -p no:cacheprovider > "$out/pytest-tensor.txt" 2>&1
tail -1 "$out/pytest-tensor.txt"
git show fb95271:kernels/wgmma_ws.cu.j2 | sed 's/^name = "wgmma_ws"/name = "ws_old"/' > /tmp/k/ws_old.cu.j2
export KDIRS=/tmp/k
timeout 150 python3 benchmarks/power-steps/check.py >> "$out/check.txt" 2>&1
rc=$?; grep -v PASS "$out/check.txt" | tail -1
[ $rc = 124 ] && { echo "TIMEOUT"; exit 1; }
XCONFIGS='[["ws_old", {}], ["wgmma_ws", {}]]' timeout 200 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
  gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu.txt" 2>&1
grep -E "gemm|nvjet|duration|elapsed|inst_" "$out/ncu.txt" | grep -v "==PROF==" | sed 's/  */ /g' | paste - - - - -
CASES=benchmarks/power-steps/cases38.py timeout 400 python3 benchmarks/lean-steps/interleave.py 16 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
