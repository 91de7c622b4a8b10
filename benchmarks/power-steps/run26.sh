#!/bin/bash
# Run 26: the tf32 tensor maps typed TFLOAT32 instead of FLOAT32 (the copy engine then writes TF32 values into
# shared memory): correctness on odd shapes (check.py), the clock alone after idle (ncu, free clocks, against
# FLOAT32 and cuBLAS), and 12 interleaved rounds in alternating processes.
# Usage: bash benchmarks/power-steps/run26.sh OUTDIR
out=${1:?usage: run26.sh OUTDIR}
mkdir -p "$out"
M=gpu__time_duration.sum,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second
for t in FLOAT32 TFLOAT32; do
  sed -i "s/\"tf32\": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_[A-Z0-9]*}/\"tf32\": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_$t}/" gemmlab/runner.py
  grep -o "CU_TENSOR_MAP_DATA_TYPE_[A-Z0-9]*}" gemmlab/runner.py
  echo "== $t"
  [ $t = TFLOAT32 ] && VARIANT=wgmma_tf32 python3 benchmarks/power-steps/check.py 2>&1 | tail -13
  XCONFIGS='[["wgmma_tf32", {}], ["wgmma_tf32", {}]]' timeout 100 ncu --clock-control none -k 'regex:^gemm$|sm90_xmma' --metrics $M \
    python3 benchmarks/store-steps/ncu_launches.py 4096 tf32 > "$out/ncu-$t.txt" 2>&1
  grep -E "^  [a-zA-Z_0-9]+.*\(|duration|cycles_elapsed.max|per_second" "$out/ncu-$t.txt" | grep -v "==PROF==" | sed 's/ (.*//' | cut -c1-80
done 2>&1 | tee "$out/summary.txt"
for i in 1 2; do
  for t in FLOAT32 TFLOAT32; do
    sed -i "s/\"tf32\": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_[A-Z0-9]*}/\"tf32\": drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_$t}/" gemmlab/runner.py
    echo "== $t ($i)"
    CASES=benchmarks/power-steps/cases18.py timeout 120 python3 benchmarks/lean-steps/interleave.py 6 "$out/i-$t-$i.json" 2>&1 | tail -4
  done
done 2>&1 | tee "$out/interleave.txt"
git checkout -q gemmlab/runner.py
