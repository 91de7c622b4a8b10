#!/bin/bash
# Run 23: where wgmma_tf32's power goes. Each kernel alone after idle, caches flushed (ncu at free clocks): the
# clock it runs at says how much power it draws per cycle. tf32_x is wgmma_tf32 with switches that remove one
# part of the work each (tf32_x.patch; NOLDS, NOMMA and NOSTORE give wrong results on purpose): NOCVT (no
# rounding), NOLDS (fragments made up in registers), NOMMA (no wgmma), NOSTORE (no C store); then the runner's
# tensor maps at 128-byte L2 promotion.
# Usage: bash benchmarks/power-steps/run23.sh OUTDIR
out=${1:?usage: run23.sh OUTDIR}
mkdir -p "$out" /tmp/k
cp kernels/wgmma_tf32.cu.j2 /tmp/k/tf32_x.cu.j2 && patch -s /tmp/k/tf32_x.cu.j2 benchmarks/power-steps/tf32_x.patch
export KDIRS=/tmp/k
M=gpu__time_duration.sum,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second
run() {  # label, XCONFIGS
  XCONFIGS="$2" timeout 120 ncu --clock-control none -k 'regex:^gemm$|xmma' --metrics $M \
    python3 benchmarks/store-steps/ncu_launches.py 4096 tf32 > "$out/ncu-$1.txt" 2>&1
  echo "== $1"
  grep -E "^  [a-zA-Z_0-9]+.*\(|duration|cycles_elapsed.max|per_second" "$out/ncu-$1.txt" | grep -v "==PROF==" \
    | sed 's/ (.*//' | awk '/^  [^ ]/{k=$1; next} {printf "%s %s %s %s\n", k, $1, $2, $3}' | grep -v sm80
}
{
run switches '[["tf32_x", {}], ["tf32_x", {"NOCVT": true}], ["tf32_x", {"NOLDS": true}], ["tf32_x", {"NOSTORE": true}],
  ["tf32_x", {"NOMMA": true}], ["tf32_x", {}], ["tf32_x", {"NOCVT": true}], ["tf32_x", {"NOLDS": true}], ["tf32_x", {"NOSTORE": true}], ["tf32_x", {"NOMMA": true}]]'
sed -i "s/CU_TENSOR_MAP_L2_PROMOTION_[A-Z0-9_]*,/CU_TENSOR_MAP_L2_PROMOTION_L2_128B,/" gemmlab/runner.py
run l2-128 '[["tf32_x", {}], ["tf32_x", {}]]'
git checkout -q gemmlab/runner.py
} 2>&1 | tee "$out/summary.txt"
