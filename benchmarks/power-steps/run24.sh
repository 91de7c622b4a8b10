#!/bin/bash
# Run 24: is it the loads or the data? tf32_x (tf32_x.patch) alone after idle at free clocks (ncu): fragments
# loaded (smem, the kernel), made up nearly constant (NOLDS), made up of random bits (FRAG=random), or loaded
# and thrown away with nearly constant ones fed to the wgmma (FRAG=lds_made).
# Usage: bash benchmarks/power-steps/run24.sh OUTDIR
out=${1:?usage: run24.sh OUTDIR}
mkdir -p "$out" /tmp/k
cp kernels/wgmma_tf32.cu.j2 /tmp/k/tf32_x.cu.j2 && patch -s /tmp/k/tf32_x.cu.j2 benchmarks/power-steps/tf32_x.patch
export KDIRS=/tmp/k XCONFIGS='[["tf32_x", {}], ["tf32_x", {"NOLDS": true}], ["tf32_x", {"FRAG": "random"}], ["tf32_x", {"FRAG": "lds_made"}],
  ["tf32_x", {}], ["tf32_x", {"NOLDS": true}], ["tf32_x", {"FRAG": "random"}], ["tf32_x", {"FRAG": "lds_made"}]]'
timeout 150 ncu --clock-control none -k 'regex:^gemm$|xmma' \
  --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second \
  python3 benchmarks/store-steps/ncu_launches.py 4096 tf32 > "$out/ncu.txt" 2>&1
python3 - "$out/ncu.txt" <<'PY' | tee "$out/summary.txt"
import re, sys
labels = ["smem", "smem", "NOLDS", "NOLDS", "random", "random", "lds_made", "lds_made"] * 2 + ["cuBLAS", "cuBLAS"]
rows, cur = [], None
for line in open(sys.argv[1]):
    m = re.match(r"^  (\S+) \(", line)
    if m:
        cur = {"k": m.group(1)}; rows.append(cur); continue
    m = re.match(r"^\s+(\S+)\s+\S+\s+([\d,.]+)$", line.rstrip())
    if cur is not None and m:
        cur[m.group(1).split("__")[0]] = m.group(2)
rows = [r for r in rows if not r["k"].startswith("sm80")]
for lab, r in zip(labels, rows):
    print(f"{lab:10s} {r['gpc']:>5s} GHz {r['gpu']:>8s} us {r['sm']:>9s} cycles")
PY
