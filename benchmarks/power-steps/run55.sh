#!/bin/bash
# Run 55 (gpcmap.py, merge.py): which SMs share a GPC, where wgmma_ws's clusters sit by GPC, and whether the L2's
# request coalescer merges loads of SMs of one GPC that are not in one TPC (run 54 found merges within a TPC, and
# hardly any between smid s and s ^ 2: if SM numbers go round the GPCs, those are in different GPCs).
# Usage: bash benchmarks/power-steps/run55.sh OUTDIR
out=${1:?usage: run55.sh OUTDIR}
mkdir -p "$out"
python3 benchmarks/power-steps/gpcmap.py > "$out/gpcmap.txt" 2>&1
grep -v "^   \[" "$out/gpcmap.txt"
MODES=none,tpc,next,gpc,xgpc,gpc_all L2S=cold CHUNKS=64 DELAYS=0,1000 timeout 400 ncu --clock-control base --cache-control none \
  -k regex:probe --metrics lrc__request_sectors_op_read_coalescable.sum,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,\
lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum \
  python3 benchmarks/power-steps/merge.py > "$out/merge.txt" 2>&1
python3 - "$out/merge.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
labels = re.findall(r"^launch \d+: (.*)$", text, re.M)
blocks = re.split(r"\n  probe", text)[1:]
print(f"{'launch':48s} {'requested':>14s} {'merged':>14s} {'L2 reads':>14s} {'DRAM':>10s} {'time':>10s}")
def val(b, m):
    r = re.search(m + r"\s+(\S+)\s+([\d,.]+)", b)
    return f"{r.group(2)} {r.group(1)}" if r else "?"
for lab, b in zip(labels, blocks):
    print(f"{lab:48s} {val(b, 'coalescable.sum'):>14s} {val(b, 'type_hardware.sum'):>14s} {val(b, 'op_read.sum'):>14s} "
          f"{val(b, 'dram__bytes_read.sum'):>10s} {val(b, 'duration.sum'):>10s}")
if len(labels) != len(blocks):
    print("launches printed:", len(labels), "profiled:", len(blocks)); print(text[-3000:])
PY
