#!/bin/bash
# Instructions, L2 and DRAM bytes and cycles (ncu, clock locked at base) and the sustained clock (energy.py) of
# wgmma_ws variants against cuBLAS at bf16 4096^3. Needs experiments.patch applied (WAIT_HINT) and the store
# experiments' template for FASTDESC (benchmarks/store-steps/README.md), here given WAIT_HINT too.
# Usage: bash benchmarks/power-steps/profile.sh OUTDIR
set -e
out=${1:?usage: profile.sh OUTDIR}
mkdir -p /tmp/k "$out"
git show HEAD:kernels/wgmma_ws.cu.j2 > /tmp/k/ws_x.cu.j2
patch -s /tmp/k/ws_x.cu.j2 benchmarks/store-steps/ws_x.patch
sed -i 's/^\[params.EPILOGUE\]/[params.WAIT_HINT]\ndefault = false\nchoices = [false, true]\nhelp = "x"\n\n[params.EPILOGUE]/' /tmp/k/ws_x.cu.j2
export KDIRS=/tmp/k
export XCONFIGS='[["wgmma_ws", {}], ["wgmma_ws", {"WAIT_HINT": true}], ["ws_x", {"FASTDESC": true}],
  ["ws_x", {"FASTDESC": true, "WAIT_HINT": true}], ["wgmma_ws", {"CLUSTER_M": 2, "STREAM_K": false, "WAIT_HINT": true}]]'
ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
  sm__cycles_elapsed.max,smsp__inst_executed.sum,lts__t_bytes.sum,dram__bytes_read.sum \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu.txt" 2>&1 || true
grep -E "^  [a-z_]+.*\(|gemm|nvjet|cycles|inst_|bytes" "$out/ncu.txt" | grep -v "==PROF==" | head -80
