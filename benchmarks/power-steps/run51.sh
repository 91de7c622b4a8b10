#!/bin/bash
# Run 51: placement.py with cuBLAS's grid (2, 66) in clusters of (1, 2, 1), the shape its name (1x2) suggests, as
# well as (2, 1, 1): if a cluster along y put its two blocks on different SM pairs, the pairs would hold blocks of
# two clusters, whose loads of the same A tile the coalescer could merge (runs 47-50).
# Usage: bash benchmarks/power-steps/run51.sh OUTDIR
out=${1:?usage: run51.sh OUTDIR}
mkdir -p "$out"
python3 benchmarks/power-steps/placement.py 2>&1 | tee "$out/placement.txt" | grep -vE "^   [0-9]"
