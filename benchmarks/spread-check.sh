#!/bin/bash
# Issue 46 across ranks, on one 4-GPU host (from the repository root; mpirun and mpi4py there; OUT=DIR):
# a sweep and a small suite under mpirun (rows through MPI), a compare under torchrun if torch is there
# (rows through torch's TCP store), and the same sweep with --store (rows through files). Prints a short
# check of each merged file: rows from every rank, each item once, one table printed. At most 60 s.
set -u
OUT=${OUT:-/tmp/mpi-check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export GEMMLAB_HISTORY=$(mktemp -d)/history.db  # a fresh history: nothing is taken from an earlier run
nvidia-smi -L | head -4
python3 -c "import mpi4py; print('mpi4py', mpi4py.__version__)"; mpirun --version | head -1
git log --oneline -1 | cut -c1-100
MPI="mpirun --allow-run-as-root -n 4 -x PYTHONPATH -x GEMMLAB_HISTORY"
T0=$SECONDS
left() { local n=$((57 - (SECONDS - T0))); echo $((n > 1 ? n : 1)); }  # each step gets what is left of 57 s; one with under 12 s is left out

timeout $(left) $MPI python3 -m gemmlab sweep --variant tiled --size 1024 --param TILE=8,16,32 --param PREFETCH=false,true \
    --out "$OUT/mpi-sweep.json" > "$OUT/mpi-sweep.txt" 2>&1; echo "sweep rc=$? ($((SECONDS - T0)) s)"
timeout $(left) $MPI python3 -m gemmlab suite --variants tiled --only 256x256x256,256x256x1024,256x256x8192,128x128x32768 \
    --out "$OUT/mpi-suite.json" > "$OUT/mpi-suite.txt" 2>&1; echo "suite rc=$? ($((SECONDS - T0)) s)"
if [ $(left) -lt 12 ]; then
    echo "no time left for the torchrun compare"
elif python3 -c "import torch.distributed" 2>/dev/null && command -v torchrun > /dev/null; then
    timeout $(left) torchrun --nproc-per-node 4 -m gemmlab compare --variants naive,coalesced,tiled,blocktile1d --size 1024 \
        --out "$OUT/torchrun-compare.json" > "$OUT/torchrun-compare.txt" 2>&1; echo "compare rc=$? ($((SECONDS - T0)) s)"
else
    echo "no torch here: the torchrun compare is left out"
fi
if [ $(left) -ge 12 ]; then  # the same through files (--store) instead of MPI, where there is time
    timeout $(left) $MPI python3 -m gemmlab sweep --variant tiled --size 512 --param TILE=8,16,32 \
        --param PREFETCH=false,true --store "$OUT/store-$$" --out "$OUT/file-sweep.json" > "$OUT/file-sweep.txt" 2>&1
    echo "file-store sweep rc=$? ($((SECONDS - T0)) s)"
fi

python3 - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])

def check(name, title, kernel_key, want_items, world=4):
    path = out / f"{name}.json"
    if not path.exists():
        print(f"{name}: NO FILE;", (out / f"{name}.txt").read_text()[-1500:] if (out / f"{name}.txt").exists() else "")
        return
    doc = json.loads(path.read_text())
    rows = doc["rows"]
    refs = [r for r in rows if r["variant"] in ("cuBLAS", "cupy")]
    kernels = [r for r in rows if r not in refs]
    items = [kernel_key(r) for r in kernels]
    printed = (out / f"{name}.txt").read_text().count(title)
    ok = (doc.get("ranks") == world and sorted(items) == sorted(want_items) and len(set(items)) == len(items)
          and {r["rank"] for r in rows} == set(range(world)) and all(r["status"] == "PASS" for r in rows)
          and printed == 1 and "fault" not in doc)
    print(f"{name}: {'OK' if ok else 'WRONG'}: ranks={doc.get('ranks')} launcher={doc.get('launcher')} "
          f"rows={len(rows)} ({len(kernels)} kernels, {len(refs)} references) tables printed={printed} "
          f"fault={doc.get('fault')}")
    for b in doc.get("by_rank", []):
        print(f"   rank {b['rank']} on {b['host']} ({b['device']}): {b['rows']} rows")
    for r in rows:
        print(f"   {r['rank']} {r['variant']:12} {kernel_key(r)!s:40} {r['status']:7} {r['ms'] or 0:.4f} ms "
              f"x cuBLAS {r.get('pct_cublas') or 0:.0f}%")

check("mpi-sweep", "sweep 1024x1024x1024", lambda r: tuple(sorted(r["params"].items())),
      [(("PREFETCH", f), ("TILE", t)) for t in (8, 16, 32) for f in (False, True)])
check("mpi-suite", "suite lab on", lambda r: r["shape"],
      ["256x256x256", "256x256x1024", "256x256x8192", "128x128x32768"])
if (out / "torchrun-compare.txt").exists():
    check("torchrun-compare", "compare 1024x1024x1024", lambda r: r["variant"],
          ["naive", "coalesced", "tiled", "blocktile1d"])
if (out / "file-sweep.txt").exists():
    check("file-sweep", "sweep 512x512x512", lambda r: tuple(sorted(r["params"].items())),
          [(("PREFETCH", f), ("TILE", t)) for t in (8, 16, 32) for f in (False, True)])
EOF
echo "total $((SECONDS - T0)) s"
