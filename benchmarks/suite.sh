#!/usr/bin/env bash
# The suite's small shapes: sweeps of the rungs made for them, each beside cuBLAS, with the winners
# saved into the tuning cache that `--variant auto` reads; then the whole suite with auto:
#     benchmarks/suite.sh h100     (writes benchmarks/h100-sweep-split/{skinny_async,skinny_narrow,pipelined}-MxNxK.json, h100-suite.json)
# skinny_async at M = 1, 16, 32, 64 (N = K = 3072; at 32 and 64 rows also with 16-row blocks, which read B
# twice or four times, the repeats from L2), skinny_narrow at M = 1, pipelined with K split up to 128 ways at 128x128x32768 and up
# to 64 ways at 256 x 256 x (256, 1024, 8192), and spread with its medium tile and K split at 512, 256, 128
# and 64 x 3072 x 3072 and 256x256x8192 (wider grids than the sweeps of runs 7 and 8 of
# benchmarks/h100-spread-steps.txt, which chose the shipped entries at 512, 256 and 128 rows, and than those in
# benchmarks/h100-sweep-split/spread-{128,64}x3072x3072.json, which chose the 64-row entry; this script has not
# been run with them yet).
# A winner is saved only if it beats what the cache (or kernels/tuning.json) has. Ship the winners by
# copying the cache's entries (`gemmlab sweep --help` says where it is) into kernels/tuning.json.
set -euo pipefail
name=${1:?usage: benchmarks/suite.sh NAME (the prefix of the result files, e.g. h100)}
cd "$(dirname "$0")/.."
dir="benchmarks/$name-sweep-split"
mkdir -p "$dir"
sweep() {  # sweep OUTFILE ARGS...: write the results to OUTFILE only once the sweep is complete
    local out=$1; shift
    rm -f "$out.tmp"
    python3 -m gemmlab sweep "$@" --save-best --fresh --out "$out.tmp" || true
    mv "$out.tmp" "$out"
}
for M in 1 16 32 64; do
    BM=$([ "$M" -lt 32 ] && echo "$M" || echo 16,32)
    EVICT=$([ "$M" -lt 32 ] && echo false,true || echo false)  # the L2 hint, where each block reads all of B once
    sweep "$dir/skinny_async-${M}x3072x3072.json" --variant skinny_async -M "$M" -N 3072 -K 3072 --param BM=$BM \
        --param WARPS=2,4 --param ROWS=8,16 --param STAGES=2,3,4 --param SPLIT_K=4,8,16,32,64 --param EVICT_FIRST=$EVICT
done
sweep "$dir/skinny_narrow-1x3072x3072.json" --variant skinny_narrow -M 1 -N 3072 -K 3072 --param COLS=16,32,64 \
    --param WARPS=4,8,16 --param ROWS=8,16 --param STAGES=2,3,4 --param EVICT_FIRST=false,true
sweep "$dir/pipelined-128x128x32768.json" --variant pipelined -M 128 -N 128 -K 32768 --param BM=64,128 \
    --param BN=64,128 --param WM=32,64 --param WN=32,64 --param TM=4,8,16 --param TN=4,8 --param SPLIT_K=32,64,128
for K in 256 1024 8192; do
    sweep "$dir/pipelined-256x256x$K.json" --variant pipelined -M 256 -N 256 -K "$K" --param BM=64 --param BN=64,128 \
        --param WM=32 --param WN=32,64 --param TM=4,8 --param TN=4,8 --param STAGES=3,4 --param SPLIT_K=2,4,8,16,32,64
done
MED="--param BM=64 --param BN=128 --param WM=32 --param WN=64 --param TM=8 --param TN=8 --param STAGES=3"
for M in 512 256 128 64; do
    sweep "$dir/spread-${M}x3072x3072.json" --variant spread -M "$M" -N 3072 -K 3072 $MED --param BK=16,32 \
        --param UNROLL=4,8 --param SPLIT_K=2,4,8,16,32
done
sweep "$dir/spread-256x256x8192.json" --variant spread -M 256 -N 256 -K 8192 --param BM=64 --param BN=64,128 \
    --param WM=32 --param WN=32,64 --param TM=4,8 --param TN=8 --param BK=16,32 --param STAGES=3 --param SPLIT_K=16,32,64
python3 -m gemmlab suite --rounds 3 --json > "benchmarks/$name-suite.json.tmp"
mv "benchmarks/$name-suite.json.tmp" "benchmarks/$name-suite.json"
python3 -m gemmlab report "benchmarks/$name-suite.json"
