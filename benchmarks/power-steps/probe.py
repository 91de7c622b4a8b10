"""Run 30: where a wgmma_ws tile's cycles go, SM by SM, and whether the C store is slow because every SM stores
at once (then a grid of fewer SMs would store faster) or because of each SM's own path to the L2 (the same).
ws_p = kernels/wgmma_ws.cu.j2 + probe.patch, in KDIRS: each consumer warpgroup records clock64 at a piece's
start, at the end of its K loop and after its store, and %globaltimer at the end of its K loop. The probe is
read after one more launch that follows an L2 flush, as each timed repetition does. Fewer SMs: the persistent
grid sized for SMS = 66 or 16 (the same GEMM in more tiles per block).
Usage: KDIRS=/tmp/k python3 benchmarks/power-steps/probe.py OUT.json"""
import sys, json, os, dataclasses, types, numpy as np, cupy as cp, gemmlab
import gemmlab.runner as runner
from gemmlab.runner import Problem, Shape
from gemmlab.compile import _loaded

cat = gemmlab.catalog(tuple(os.environ["KDIRS"].split(":")))
v = cat.get("ws_p")
flush = cp.empty(runner.FLUSH_BYTES, dtype=cp.uint8)
state = {}
bench = runner.bench


def probed_bench(fn, **kw):  # the runner's timing, then one more launch after a flush, whose probe is kept
    t = bench(fn, **kw)
    flush.fill(0)
    fn()
    cp.cuda.Device().synchronize()
    state["buf"] = cp.ndarray((1024, 16, 2, 4), cp.uint64, memptr=state["mod"].get_global("probe")).get()
    return t


runner.bench = probed_bench
rows, out = [], {}
for n, smss in [(4096, [None, 66, 16]), (8192, [None])]:
    pr = Problem(Shape(n, n, n), seed=1, dtype="bf16")
    full = pr.device
    for sms in smss:
        for nostore in (False, True):
            p = v.resolve(v.for_dtype("bf16", {"NOSTORE": nostore}))
            c = gemmlab.build(v, p)
            pr.device = dataclasses.replace(full, sms=sms or full.sms)
            pr.check = (lambda ref=None: types.SimpleNamespace(passed=True, rel_err=0.0)) if nostore else \
                Problem.check.__get__(pr)
            gemmlab.compile.load(c)
            state["mod"] = _loaded[c.key]
            r = pr.run(v, p, c)
            if not r.check.passed:
                print("FAILED", n, sms, r.check, flush=True)
                continue
            G = r.geometry.grid[0]
            per = min(-(-(n // 256) ** 2 // (G // 2)), 16)  # pieces of the busiest block (whole tiles here)
            buf = state["buf"][:G, :per]
            clk = buf[..., :3].astype(np.int64)
            main, epi = clk[..., 1] - clk[..., 0], clk[..., 2] - clk[..., 1]
            ok = main > 0  # blocks with fewer tiles leave their last slot empty
            gap = (clk[:, 1:, :, 0] - clk[:, :-1, :, 2])[ok[:, 1:]]
            gt = buf[..., 3].astype(np.int64)
            spread = [int(np.percentile(gt[ok[:, i, 0], i, 0], 90) - np.percentile(gt[ok[:, i, 0], i, 0], 10))
                      for i in range(per)]
            row = dict(n=n, sms=pr.device.sms, grid=G, store=not nostore, pieces=per, ms=r.timing.median_ms,
                       kloop=float(np.median(main[ok])), first=float(np.median(main[:, 0])),
                       epi=float(np.median(epi[ok])), epi10=float(np.percentile(epi[ok], 10)),
                       epi90=float(np.percentile(epi[ok], 90)), gap=float(np.median(gap)) if gap.size else 0.0,
                       spread_ns=spread[:6])
            rows.append(row)
            out[f"{n}-{row['sms']}-{'store' if row['store'] else 'nostore'}"] = dict(row, clk=clk.tolist(), gt=gt.tolist())
            print(json.dumps(row), flush=True)
json.dump(out, open(sys.argv[1], "w"))
print(f"{'n':>5} {'SMs':>4} {'grid':>4} {'store':>5} {'ms':>7} {'tiles':>5} {'K loop':>7} {'first':>7} {'store cyc':>9} "
      f"{'p10-p90':>13} {'gap':>5}  spread of K-loop ends over blocks, p10-p90 ns, per tile")
for r in rows:
    print(f"{r['n']:5d} {r['sms']:4d} {r['grid']:4d} {'yes' if r['store'] else 'no':>5} {r['ms']:7.4f} {r['pieces']:5d} "
          f"{r['kloop']:7.0f} {r['first']:7.0f} {r['epi']:9.0f} {r['epi10']:6.0f}-{r['epi90']:6.0f} {r['gap']:5.0f}  {r['spread_ns']}")
