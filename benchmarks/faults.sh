#!/usr/bin/env bash
# The fault-isolation and sanitizer demonstration of the README, with the broken templates of
# examples/broken/: compare survives a crash and a hang; the sanitizer finds a race and an overrun.
#     benchmarks/faults.sh h100     (writes benchmarks/h100-faults.json, h100-sanitize-*.json, h100-faults.txt)
set -uo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: benchmarks/faults.sh NAME}
log="benchmarks/$name-faults.txt"
rm -f "benchmarks/$name-faults.json"
{
    echo "# $(date -u +%FT%TZ) commit ${GEMMLAB_COMMIT:-$(git rev-parse --short=12 HEAD)}"
    echo '$ gemmlab compare --variants naive,oob,hang,tiled --kernels-dir examples/broken --size 1024 --timeout 10'
    start=$(date +%s)
    python3 -m gemmlab compare --variants naive,oob,hang,tiled --kernels-dir examples/broken --size 1024 \
        --timeout 10 --out "benchmarks/$name-faults.json" 2>&1
    echo "exit status $?, $(( $(date +%s) - start )) s in all"
    for tool in racecheck memcheck; do
        variant=$([ "$tool" = racecheck ] && echo racy || echo edge)
        echo "\$ gemmlab run --variant $variant --kernels-dir examples/broken --sanitize $tool"
        python3 -m gemmlab run --variant "$variant" --kernels-dir examples/broken --sanitize "$tool" --seed 1 2>&1
        echo "exit status $?"
        python3 -m gemmlab run --variant "$variant" --kernels-dir examples/broken --sanitize "$tool" --seed 1 \
            --json > "benchmarks/$name-sanitize-$tool.json"
    done
} | tee "$log"
