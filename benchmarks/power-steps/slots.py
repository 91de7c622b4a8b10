"""Slot tables for slots.patch (run 56): which slot of the persistent grid the cluster on each TPC takes, so that
clusters of one GPC start their tiles on shared rows of A or columns of B, where the L2's request coalescer can
serve their loads once (run 55: it merges loads within a GPC, not between GPCs). For 4096^3 bf16 in 256 x 256
cluster tiles, GROUP_M 8: 256 tiles, slot v does tiles v, v + 66, ... Prints JSON {name: "66 numbers"}:
  natural  the slot each TPC's cluster gets anyway (blockIdx.x / 2): the default, through the table
  consec   the clusters of a GPC in consecutive slots (one column of B in the first wave)
  search   a local search for the most A rows and B columns shared within GPCs over the four waves
  rows     the clusters of a GPC in one class of slots mod 8: in GROUP_M 8 they then share their A rows in
           every wave (run 56: only A's plain loads merge, not B's multicast ones)
Usage: python3 benchmarks/power-steps/slots.py > slots.json"""
import collections
import json
import random
import sys
from gpcmap import gpc_map, placements

gpcs = gpc_map()
gpc = {s // 2: g for g, sms in enumerate(gpcs) for s in sms}
# SMs that no cluster of 4 or more reached (124-131 on run 55's H100) show as GPCs of their own; run 54's "next"
# pairs merged there, so they are taken as one GPC
loose = sorted({s // 2 for sms in gpcs if len(sms) <= 2 for s in sms})
for t in loose:
    gpc[t] = -1
_, runs = placements(2, 66, reps=1)
natural = {runs[0][2 * c] // 2: c for c in range(66)}  # by the TPC of rank 0, as slots.patch reads it
print("clusters whose two blocks sit on different TPCs:", sum(runs[0][2 * c] // 2 != runs[0][2 * c + 1] // 2 for c in range(66)),
      file=sys.stderr)
assert sorted(natural) == list(range(66)), natural


def origin(t, grid=16, gm=8):
    group, ig = divmod(t, gm * grid)
    return group * gm + ig % gm, ig // gm


WAVES = [[origin(t) for t in range(v, 256, 66)] for v in range(66)]


def shared(slot, what="AB"):
    s = 0
    for w in range(4):
        by = collections.defaultdict(list)
        for t, v in slot.items():
            if w < len(WAVES[v]):
                by[gpc[t]].append(WAVES[v][w])
        for lst in by.values():
            s += ("A" in what) * (len(lst) - len({r for r, _ in lst})) + ("B" in what) * (len(lst) - len({c for _, c in lst}))
    return s


consec = {t: i for i, t in enumerate(sorted(range(66), key=lambda t: (gpc[t], t)))}
best, score = dict(natural), shared(natural)
rng = random.Random(0)
for _ in range(40000):
    a, b = rng.sample(range(66), 2)
    best[a], best[b] = best[b], best[a]
    s = shared(best)
    if s >= score:
        score = s
    else:
        best[a], best[b] = best[b], best[a]
classes = {r: list(range(r, 66, 8)) for r in range(8)}  # slots by residue mod 8: 9, 9, 8, 8, 8, 8, 8, 8
members = collections.defaultdict(list)
for t in range(66):
    members[gpc[t]].append(t)
rows = {}
for g in sorted(members, key=lambda g: -len(members[g])):  # the largest GPCs first, each into the fullest class
    r = max(classes, key=lambda r: (len(classes[r]), -r))
    for t in members[g]:
        if not classes[r]:  # the class is full: the rest of the GPC into the fullest other
            r = max(classes, key=lambda r: (len(classes[r]), -r))
        rows[t] = classes[r].pop(0)
assert sorted(rows.values()) == list(range(66))
tables = (("natural", natural), ("consec", consec), ("search", best), ("rows", rows))
out = {name: ",".join(str(m[t]) for t in range(66)) for name, m in tables}
print("shared loads of 256 each (A rows, B columns over 4 waves, within GPCs):",
      {n: (shared(m, "A"), shared(m, "B")) for n, m in tables}, file=sys.stderr)
print(json.dumps(out))
