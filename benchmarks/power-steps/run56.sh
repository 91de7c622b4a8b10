#!/bin/bash
# Run 56 (slots.patch, slots.py): clusters of one GPC started on tiles that share A rows or B columns, so that the
# L2's request coalescer (which merges loads within a GPC, run 55) serves more of their loads once. The slot of
# each TPC's cluster comes from a table made on the device from its GPC map. Correctness at the full grid's shapes
# (the table assumes 66 clusters), ncu at the base clock (merged sectors, L2 reads, cycles), interleaved rounds.
# TABLES: the tables checked and profiled, INTER: those timed, SIZES: the sizes timed (run 57: TABLES=rows INTER=rows).
# Usage: git apply benchmarks/power-steps/slots.patch; [TABLES=..] [INTER=..] [SIZES=..] bash benchmarks/power-steps/run56.sh OUTDIR [ROUNDS]
out=${1:?usage: run56.sh OUTDIR [ROUNDS]}
mkdir -p "$out"
export TABLES=${TABLES:-natural,consec,search} INTER=${INTER:-consec,search} SIZES=${SIZES:-4096}
(cd benchmarks/power-steps && python3 slots.py) > "$out/slots.json" 2> "$out/slots.err" || { cat "$out/slots.err"; exit 1; }
cat "$out/slots.err"
ONLY=0,5,11 timeout 150 python3 benchmarks/power-steps/check.py $(python3 -c "
import json; t = json.load(open('$out/slots.json'))
print(' '.join(json.dumps({'SLOTS': t[k]}, separators=(',', ':')) for k in '$TABLES'.split(',')))") > "$out/check.txt" 2>&1
sed 's/SLOTS.: .[0-9,]*./SLOTS/' "$out/check.txt" | cut -c1-120
XCONFIGS=$(python3 -c "
import json; t = json.load(open('$out/slots.json'))
print(json.dumps([['wgmma_ws', {}]] + [['wgmma_ws', {'SLOTS': t[k]}] for k in '$TABLES'.split(',')]))") \
timeout 300 ncu --clock-control base -k 'regex:^gemm$|nvjet' --metrics \
lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__cycles_elapsed.max \
  python3 benchmarks/store-steps/ncu_launches.py 4096 bf16 > "$out/ncu.txt" 2>&1
grep -E "^  [a-z]|lts|lrc|dram|cycles" "$out/ncu.txt" | grep -v "==PROF==" | sed 's/  */ /g'
python3 -c "
import json; t = json.load(open('$out/slots.json'))
print(repr([(d, n, [('wgmma_ws', {})] + [('wgmma_ws', {'SLOTS': t[k]}) for k in '$INTER'.split(',')]) for n in ($SIZES,) for d in ('bf16', 'fp16')]))" > "$out/cases56.py"
CASES="$out/cases56.py" timeout 400 python3 benchmarks/lean-steps/interleave.py ${2:-8} "$out/interleave.json" > "$out/interleave.txt" 2>&1
tail -8 "$out/interleave.txt" | sed 's/SLOTS=[0-9,]*/SLOTS/' | cut -c1-200
