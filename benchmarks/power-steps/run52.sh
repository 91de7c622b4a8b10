#!/bin/bash
# Run 52: SNAKE, K walked backwards in every other tile of a block. At 4096^3 a wave of 132 tiles in GROUP_M 8
# reads all of B (32 MB), 8 MB of A and writes 17 MB of C, more than the L2 keeps, so the next wave, starting
# again at K = 0, finds B's first K slices evicted: DRAM reads 149 MB where A and B are 64. A wave that starts
# where the last one ended (at the last K slices, read moments before) should find them in the L2.
# The template change is snake.patch (git apply it first). Correctness (check.py), ncu at the base clock (DRAM, L2, cycles), then interleaved rounds with cuBLAS.
# Usage: bash benchmarks/power-steps/run52.sh OUTDIR [ROUNDS]
out=${1:?usage: run52.sh OUTDIR [ROUNDS]}
mkdir -p "$out"
python3 benchmarks/power-steps/check.py '{"SNAKE": true}' > "$out/check.txt" 2>&1; tail -1 "$out/check.txt"
for n in 4096 8192; do
XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"SNAKE": true}], ["wgmma_ws", {"SNAKE": true, "GROUP_M": 16}]]' timeout 300 ncu --clock-control base -k 'regex:^gemm$' --metrics \
dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_elapsed.max \
  python3 benchmarks/store-steps/ncu_launches.py $n bf16 > "$out/ncu-$n.txt" 2>&1
grep -E "^wgmma|^  [a-z]|gemm|lts|lrc|dram|cycles" "$out/ncu-$n.txt" | grep -v "==PROF==" | sed 's/  */ /g'
done
CASES=benchmarks/power-steps/cases52.py timeout 420 python3 benchmarks/lean-steps/interleave.py ${2:-12} "$out/interleave.json" > "$out/interleave.txt" 2>&1
tail -8 "$out/interleave.txt"
