#!/bin/bash
# Issue 46 on one host without a launcher (from the repository root; OUT=DIR; GPUS=2 by default): `--gpus N` for
# a sweep (its configurations over the GPUs, cuBLAS on the first), a compare (the same, at 2048) and two suites
# (a random BF16 draw and the lab's 12: each shape whole on one GPU, 3 rounds), each written to a file; then a
# short check of each file: every job once, the GPUs that measured them, the statuses. About 150 s on 2 H100s.
set -u
OUT=${OUT:-/tmp/gpus-check}; G=${GPUS:-2}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export GEMMLAB_HISTORY=$(mktemp -d)/history.db  # a fresh history: nothing is taken from an earlier run
nvidia-smi -L
g="python3 -m gemmlab"
timeout 90 $g sweep --variant tiled -M 2048 -N 2048 -K 2048 --param TILE=8,16,32 --gpus $G --out "$OUT/gpus$G-sweep.json" \
    > "$OUT/sweep.txt" 2>&1; echo "sweep rc $?"
timeout 90 $g compare --size 2048 --gpus $G --out "$OUT/gpus$G-compare.json" > "$OUT/compare.txt" 2>&1; echo "compare rc $?"
timeout 200 $g suite --random 8 --dtype bf16 --rounds 3 --gpus $G --out "$OUT/gpus$G-suite.json" > "$OUT/suite.txt" 2>&1
echo "suite rc $?"
timeout 100 $g suite --rounds 3 --gpus $G --out "$OUT/gpus$G-suite-lab.json" > "$OUT/suite-lab.txt" 2>&1; echo "lab suite rc $?"
python3 - "$OUT" <<'PY'
import collections, glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/gpus*.json")):
    d = json.load(open(f)); rows = [dict(r, shape=r.get("shape", str(d.get("shape")))) for r in d["rows"]]
    jobs = [(r["shape"], r["variant"], json.dumps(r.get("params"), sort_keys=True)) for r in rows]
    where = collections.defaultdict(set)
    for r in rows:
        where[r["shape"]].add(r.get("gpu"))
    print(f.split("/")[-1], len(rows), "rows,", len(jobs) - len(set(jobs)), "repeated; rows by GPU:",
          dict(collections.Counter(r.get("gpu") for r in rows)), "; shapes on one GPU:",
          sum(len(g) == 1 for g in where.values()), "of", len(where), "; statuses:", dict(collections.Counter(r["status"] for r in rows)))
PY
