#!/bin/bash
# Run 50: are cuBLAS's clusters placed as ours are? The coalescer merges loads of the two SMs of a pair (run 47),
# and our clusters fill a pair each, so only a kernel whose pairs hold blocks of two clusters could merge the
# operand that the clusters do not multicast. ncu's launch statistics of both kernels (cluster size and scheduling
# policy), then placement.py, which also launches 2-block clusters under each scheduling policy.
# Usage: bash benchmarks/power-steps/run50.sh OUTDIR
out=${1:?usage: run50.sh OUTDIR}
mkdir -p "$out"
for k in '^gemm$' nvjet; do  # one launch of each (the script launches ours twice, then cuBLAS)
  XCONFIGS='[["wgmma_ws", {}]]' timeout 200 ncu -k "regex:$k" -c 1 --section LaunchStats --print-details all \
    python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 >> "$out/launch.txt" 2>&1
done
grep -iE "gemm|nvjet|cluster|grid size|block size|registers|shared memory config" "$out/launch.txt" | grep -v "==PROF==" | sed 's/  */ /g'
python3 benchmarks/power-steps/placement.py 2>&1 | tee "$out/placement.txt" | grep -vE "^   [0-9]"
