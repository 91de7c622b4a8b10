#!/bin/bash
# Run 30: wgmma_ws's cycles per tile, SM by SM (probe.patch, probe.py): the K loop, the C store, and how the
# store's time changes when fewer SMs store at once.
# Usage: bash benchmarks/power-steps/run30.sh OUTDIR
out=${1:?usage: run30.sh OUTDIR}
mkdir -p "$out" /tmp/k
git log -1 --format='commit %H' | tee "$out/probe.txt"
cp kernels/wgmma_ws.cu.j2 /tmp/k/ws_p.cu.j2 && patch -s /tmp/k/ws_p.cu.j2 benchmarks/power-steps/probe.patch
KDIRS=/tmp/k python3 benchmarks/power-steps/probe.py "$out/probe.json" 2>&1 | tee -a "$out/probe.txt"
