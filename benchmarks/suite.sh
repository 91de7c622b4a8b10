#!/usr/bin/env bash
# skinny's sweeps at the suite's shapes with M <= 64 (N = K = 3072), each beside cuBLAS, winners saved
# into the tuning cache that `--variant auto` reads; then the whole suite with auto:
#     benchmarks/skinny.sh h100     (writes benchmarks/h100-sweep-split/skinny-MxNxK.json, h100-suite.json)
# Ship the winners by copying the cache's entries into kernels/tuning.json.
set -euo pipefail
name=${1:?usage: benchmarks/skinny.sh NAME (the prefix of the result files, e.g. h100)}
cd "$(dirname "$0")/.."
mkdir -p "benchmarks/$name-sweep-split"
for M in 1 16 32 64; do
    BM=$(( M < 32 ? M : 32 ))
    rm -f "benchmarks/$name-sweep-split/skinny-${M}x3072x3072.json.tmp"
    python3 -m gemmlab sweep --variant skinny -M "$M" -N 3072 -K 3072 --param BM=$BM --param WARPS=4,8 \
        --param UNROLL=4,8,16 --param SPLIT_K=1,2,4,8,16,32,64 --save-best --fresh \
        --out "benchmarks/$name-sweep-split/skinny-${M}x3072x3072.json.tmp" || true
    mv "benchmarks/$name-sweep-split/skinny-${M}x3072x3072.json.tmp" "benchmarks/$name-sweep-split/skinny-${M}x3072x3072.json"
done
python3 -m gemmlab suite --json > "benchmarks/$name-suite.json.tmp"
mv "benchmarks/$name-suite.json.tmp" "benchmarks/$name-suite.json"
python3 -m gemmlab report "benchmarks/$name-suite.json"
