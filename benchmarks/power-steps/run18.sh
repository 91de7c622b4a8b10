#!/bin/bash
# Run 18, at the commit that makes CLUSTER_N=2 and the float2 fragments wgmma_tf32's own: its GPU tests,
# compute-sanitizer, the README's TF32 table (5 rounds) and 12 interleaved rounds with and without clusters.
# Usage: bash benchmarks/power-steps/run18.sh OUTDIR
out=${1:?usage: run18.sh OUTDIR}
mkdir -p "$out"
git log -1 --format='commit %H' | tee "$out/pytest.txt"
python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_tensor.py tests/test_gpu.py \
  -k "not test_every_config_is_correct or wgmma_tf32" 2>&1 | tail -15 | tee -a "$out/pytest.txt"
for a in "-M 2100 -N 2000 -K 72 --sanitize memcheck" "-M 600 -N 264 -K 104 --sanitize racecheck" \
         "-M 600 -N 264 -K 104 --sanitize synccheck"; do
  echo "\$ gemmlab run --variant wgmma_tf32 --dtype tf32 $a --seed 1"
  gemmlab run --variant wgmma_tf32 --dtype tf32 $a --seed 1 2>&1 | tail -2
done | tee "$out/sanitize.txt"
gemmlab compare --rounds 5 --dtype tf32 --variants wmma,mma,wgmma_tf32 --size 4096 --out "$out/tensor-tf32-4096.json" 2>&1 | tail -8
CASES=benchmarks/power-steps/cases18.py python3 benchmarks/lean-steps/interleave.py 12 "$out/interleave.json" 2>&1 | tee "$out/interleave.txt"
