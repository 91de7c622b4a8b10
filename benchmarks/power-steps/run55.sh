#!/bin/bash
# Run 55 (gpcmap.py, merge.py): which SMs share a GPC, where wgmma_ws's clusters sit by GPC, and whether the L2's
# request coalescer merges loads of SMs of one GPC that are not in one TPC (run 54 found merges within a TPC, and
# hardly any between smid s and s ^ 2: if SM numbers go round the GPCs, those are in different GPCs).
# Usage: bash benchmarks/power-steps/run55.sh OUTDIR
out=${1:?usage: run55.sh OUTDIR}
mkdir -p "$out"
python3 benchmarks/power-steps/gpcmap.py > "$out/gpcmap.txt" 2>&1
grep -v "^   \[" "$out/gpcmap.txt"
MODES=none,tpc,next,gpc,xgpc,gpc_all L2S=cold CHUNKS=64 DELAYS=0,1000 bash "$(dirname "$0")/run54.sh" "$out"
