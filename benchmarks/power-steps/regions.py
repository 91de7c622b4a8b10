"""Run 64's reading: ncu's source page (CSV from `ncu -i R --page source --print-source sass --csv`) summed by
instruction, for each kernel launch in it: total stall samples, and the instructions holding the most of them, in
address order, so that the start, the K loop, the C store and the end can be told apart.
Usage: python3 benchmarks/power-steps/regions.py SASS.csv[.gz] [TOP]"""
import csv, gzip, sys

path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
rows = list(csv.reader((gzip.open if path.endswith(".gz") else open)(path, "rt")))
kernels, cur = [], None
for r in rows:
    if r and r[0] == "Kernel Name":
        cur = {"name": r[1], "ins": []}
        kernels.append(cur)
    elif r and r[0].startswith("0x") and cur is not None:
        cur["ins"].append((int(r[0], 16), r[1].strip(), int(r[2] or 0), int(r[5] or 0)))
for k in kernels:
    ins = k["ins"]
    base = ins[0][0]
    total = sum(i[2] for i in ins)
    print(f"== {k['name'][:60]}: {len(ins)} instructions, {total} samples")
    keep = sorted(sorted(ins, key=lambda i: -i[2])[:top])
    for a, src, s, ex in keep:
        print(f"  {a - base:#07x} {s:6d} {100 * s / total:5.1f}%  {ex:8d}  {src[:70]}")
