#!/bin/bash
# Run 58: wgmma_ws with GPC_ORDER (default on): the GPU tests of the GPC order and the tensor rungs, check.py's
# 12 shapes, ncu's count of merged loads at 4096^3, the README's BF16 and FP16 tables (run 41's compares), and
# interleaved rounds with cuBLAS, GPC_ORDER on and off. Everything goes into one archive (8 files come back).
# Usage: bash benchmarks/power-steps/run58.sh OUTDIR [ROUNDS]
out=${1:?usage: run58.sh OUTDIR [ROUNDS]}
mkdir -p "$out/all"
timeout 300 python3 -m pytest -q -m gpu tests/test_gpc.py tests/test_tensor.py > "$out/all/pytest.txt" 2>&1
tail -2 "$out/all/pytest.txt"
timeout 200 python3 benchmarks/power-steps/check.py '{}' '{"GPC_ORDER": false}' > "$out/all/check.txt" 2>&1; tail -1 "$out/all/check.txt"
XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"GPC_ORDER": false}]]' timeout 200 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_elapsed.max \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/all/ncu.txt" 2>&1
grep -E "lrc|lts|cycles" "$out/all/ncu.txt" | grep -v "==PROF==" | sed 's/  */ /g'
for size in 4096 8192; do
  for dtype in bf16 fp16; do
    variants=wmma,mma,wgmma,wgmma_ws,wgmma_pingpong
    [ "$size" = 8192 ] && variants=mma,wgmma,wgmma_ws,wgmma_pingpong
    timeout 150 gemmlab compare --rounds 5 --dtype $dtype --variants $variants --size $size --out "$out/all/h100-tensor-$dtype-$size.json" > "$out/all/compare-$dtype-$size.txt" 2>&1
    grep -E "wgmma_ws|cuBLAS" "$out/all/compare-$dtype-$size.txt" | tail -2
  done
done
CASES=benchmarks/power-steps/cases58.py timeout 400 python3 benchmarks/lean-steps/interleave.py ${2:-12} "$out/all/interleave.json" > "$out/all/interleave.txt" 2>&1
tail -9 "$out/all/interleave.txt"
tar -C "$out" -czf "$out/run58.tar.gz" all && rm -rf "$out/all"
