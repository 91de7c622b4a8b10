#!/bin/bash
# Run 54 (merge.py): when does the L2's request coalescer merge two SMs' loads of the same lines? Pairs of SMs in one
# TPC or in neighbouring TPCs load the same 1 MB in 16 KB bulk copies, one starting DELAY cycles after the other,
# from a cold or a warm L2; ncu at the base clock counts the merges of each launch.
# merge.py's MODES and L2S pass through (run55.sh sets them).
# Usage: [CHUNKS=64] [DELAYS=0,100,300,1000,3000] bash benchmarks/power-steps/run54.sh OUTDIR   (1 MB per region; CHUNKS=16: 256 KB, a warm L2 holds all)
out=${1:?usage: run54.sh OUTDIR}
mkdir -p "$out"
CHUNKS=${CHUNKS:-64} DELAYS=${DELAYS:-0,100,300,1000,3000} timeout 400 ncu --clock-control base --cache-control none -k regex:probe --metrics \
lrc__request_sectors_op_read_coalescable.sum,lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,\
lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum \
  python3 benchmarks/power-steps/merge.py > "$out/merge.txt" 2>&1
python3 - "$out/merge.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
labels = re.findall(r"^launch \d+: (.*)$", text, re.M)
blocks = re.split(r"\n  probe", text)[1:]
print(f"{'launch':48s} {'requested':>10s} {'merged':>9s} {'L2 reads':>10s} {'DRAM MB':>8s} {'us':>7s}")
def val(b, m):
    r = re.search(m + r"\s+(\S+)\s+([\d,.]+)", b)
    return f"{r.group(2)} {r.group(1)}" if r else "?"
for lab, b in zip(labels, blocks):
    print(f"{lab:48s} {val(b, 'coalescable.sum'):>14s} {val(b, 'type_hardware.sum'):>14s} {val(b, 'op_read.sum'):>14s} "
          f"{val(b, 'dram__bytes_read.sum'):>10s} {val(b, 'duration.sum'):>10s}")
PY
