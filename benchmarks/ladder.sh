#!/usr/bin/env bash
# The whole FP32 ladder against cuBLAS at five sizes, one `gemmlab compare --json` file per size:
#     benchmarks/ladder.sh h100        (writes benchmarks/h100-compare-{1024,...,8192}.json)
# The README's tables are made from these files: `gemmlab report --markdown FILE` for a ladder table,
# `gemmlab explain --results FILE --markdown` for predictions against measurements.
set -euo pipefail
name=${1:?usage: benchmarks/ladder.sh NAME (the prefix of the result files, e.g. h100)}
cd "$(dirname "$0")/.."
for size in 1024 2048 3072 4096 8192; do
    python3 -m gemmlab compare --size "$size" --json > "benchmarks/$name-compare-$size.json.tmp"
    mv "benchmarks/$name-compare-$size.json.tmp" "benchmarks/$name-compare-$size.json"
    python3 -m gemmlab report "benchmarks/$name-compare-$size.json"
done
