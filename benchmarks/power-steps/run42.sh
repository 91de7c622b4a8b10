#!/bin/bash
# Run 42: wgmma_tf32's K step made lean as wgmma_ws's was (stage and parity carried, A's descriptor and the
# fragments' offsets made once; 99 instructions per two K steps of 32 instead of 183) against the template of
# f4386ab (tf32_old): the tensor rungs' GPU tests, correctness (check.py), 16 interleaved rounds (cases42.py).
# Usage: bash benchmarks/power-steps/run42.sh OUTDIR
out=${1:?usage: run42.sh OUTDIR}
mkdir -p "$out" /tmp/k
git log -1 --format='commit %H' | tee "$out/check.txt"
timeout 200 python3 -m pytest -q -m gpu tests/test_tensor.py -p no:cacheprovider > "$out/pytest-tensor.txt" 2>&1
tail -1 "$out/pytest-tensor.txt"
git show f4386ab:kernels/wgmma_tf32.cu.j2 | sed 's/^name = "wgmma_tf32"/name = "tf32_old"/' > /tmp/k/tf32_old.cu.j2
export KDIRS=/tmp/k
VARIANT=wgmma_tf32 timeout 150 python3 benchmarks/power-steps/check.py >> "$out/check.txt" 2>&1
rc=$?; grep -v PASS "$out/check.txt" | tail -1
[ $rc = 0 ] || { echo "check failed ($rc)"; exit 1; }
CASES=benchmarks/power-steps/cases42.py timeout 300 python3 benchmarks/lean-steps/interleave.py 16 "$out/interleave.json" 2>&1 | tail -3
