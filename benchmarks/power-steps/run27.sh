#!/bin/bash
# Run 27, at the commit that types the tf32 tensor maps TFLOAT32 and drops wgmma_tf32's cvt.rna: its GPU tests
# (the new rounding test among them), check.py, compute-sanitizer, the README's TF32 table, the clock alone after
# idle (ncu) and 12 interleaved rounds.
# Usage: bash benchmarks/power-steps/run27.sh OUTDIR
out=${1:?usage: run27.sh OUTDIR}
mkdir -p "$out"
git log -1 --format='commit %H' | tee "$out/pytest.txt"
python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_tensor.py tests/test_gpu.py \
  -k "not test_every_config_is_correct or wgmma_tf32" 2>&1 | tail -4 | tee -a "$out/pytest.txt"
VARIANT=wgmma_tf32 python3 benchmarks/power-steps/check.py 2>&1 | tee "$out/check.txt" | tail -3
for a in "-M 2100 -N 2000 -K 72 --sanitize memcheck" "-M 600 -N 264 -K 104 --sanitize racecheck" \
         "-M 600 -N 264 -K 104 --sanitize synccheck"; do
  echo "\$ gemmlab run --variant wgmma_tf32 --dtype tf32 $a --seed 1"
  gemmlab run --variant wgmma_tf32 --dtype tf32 $a --seed 1 2>&1 | tail -2
done | tee "$out/sanitize.txt" | grep SUMMARY
XCONFIGS='[["wgmma_tf32", {}], ["wgmma_tf32", {}]]' timeout 100 ncu --clock-control none -k 'regex:^gemm$|sm90_xmma' \
  --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second \
  python3 benchmarks/store-steps/ncu_launches.py 4096 tf32 > "$out/ncu.txt" 2>&1
grep -E "^  [a-zA-Z_0-9]+.*\(|duration|cycles_elapsed.max|per_second" "$out/ncu.txt" | grep -v "==PROF==" | sed 's/ (.*//' | cut -c1-70 | paste - - - - | tee "$out/ncu-summary.txt"
gemmlab compare --rounds 5 --dtype tf32 --variants wmma,mma,wgmma_tf32 --size 4096 --out "$out/tensor-tf32-4096.json" 2>&1 | tail -4
CASES=benchmarks/power-steps/cases18.py python3 benchmarks/lean-steps/interleave.py 12 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
