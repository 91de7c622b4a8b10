"""Run 61: where a wgmma_ws launch's time goes outside the K loops, block by block: the launch's ramp, the start
(barriers, first data), each tile's K loop and store, and the end (last store to exit). ws_t =
kernels/wgmma_ws.cu.j2 + timeline.patch, in KDIRS; its blocks record %globaltimer at those points (and clock64 at
entry and exit). The probe is read after one more launch that follows an L2 flush, as each timed repetition does,
and the runner's timing (events, median) is printed beside it.
Usage: KDIRS=/tmp/k [SHAPE=MxNxK] python3 benchmarks/power-steps/timeline.py OUT.json '{}' '{"RELAXED": true}' ..."""
import sys, json, os, numpy as np, cupy as cp, gemmlab
import gemmlab.runner as runner
from gemmlab.runner import Problem, Shape
from gemmlab.compile import _loaded

cat = gemmlab.catalog(tuple(os.environ["KDIRS"].split(":")))
v = cat.get("ws_t")
flush = cp.empty(runner.FLUSH_BYTES, dtype=cp.uint8)
state = {"runs": []}
bench = runner.bench


def probed_bench(fn, **kw):  # the runner's timing, then 5 more launches after a flush each, whose probes are kept
    t = bench(fn, **kw)
    state["runs"] = []
    tl = cp.ndarray((1024, 32), cp.uint64, memptr=state["mod"].get_global("tl"))
    for _ in range(5):
        tl.fill(0)  # nothing left from the launch before
        flush.fill(0)
        fn()
        cp.cuda.Device().synchronize()
        state["runs"].append(tl.get())
    return t


runner.bench = probed_bench
dims = [int(x) for x in os.environ.get("SHAPE", "4096").split("x")]  # SHAPE=4096 or MxNxK
pr = Problem(Shape(*dims) if len(dims) == 3 else Shape(dims[0], dims[0], dims[0]), seed=1, dtype=os.environ.get("DTYPE", "bf16"))
out, rows = {}, []
for arg in sys.argv[2:]:
    over = json.loads(arg)
    p = v.resolve(v.for_dtype(pr.dtype, over))
    c = gemmlab.build(v, p)
    gemmlab.compile.load(c)
    state["mod"] = _loaded[c.key]
    r = pr.run(v, p, c)
    if not r.check.passed:
        print("FAILED", over, r.check, flush=True)
        continue
    G = r.geometry.grid[0]
    stats = []
    for buf in state["runs"]:
        b = buf[:G].astype(np.int64)
        t0 = b[:, 0].min()
        g = b - t0  # ns from the first block's entry
        tiles = (b[:, 16:32:2] > 0).sum(1)  # pieces with a K-loop end recorded
        kend, send = g[:, 16:32:2], g[:, 17:32:2]
        last_store = np.array([send[i, tiles[i] - 1] for i in range(G)])
        k1 = kend[:, 0] - g[:, 3]  # the first K loop, from its first data
        kl = [kend[i, j] - send[i, j - 1] for i in range(G) for j in range(1, tiles[i])]
        st = [send[i, j] - kend[i, j] for i in range(G) for j in range(tiles[i])]
        four = tiles == tiles.max()
        med = lambda x: float(np.median(x))
        stats.append(dict(
            span=int(g[:, 5].max()), ramp=int(g[:, 0].max()), sync=med(g[:, 2] - g[:, 0]),
            copy=med(g[:, 8] - g[:, 0]), data=med(g[:, 3] - g[:, 0]), first_k=med(k1), k_loop=med(kl),
            store=med(st), store90=float(np.percentile(st, 90)), end=med(g[:, 5] - last_store),
            exit4=med(g[four, 5]), exit3=med(g[~four, 5]) if (~four).any() else 0.0,
            clk4=med(b[four, 6] - b[four, 1]), tiles=int(tiles.max())))
    agg = {k: float(np.median([s[k] for s in stats])) for k in stats[0]}
    row = dict(over=over, ms=r.timing.median_ms, **agg)
    rows.append(row)
    out[json.dumps(over)] = dict(row, runs=[s for s in stats], raw=[x[:G].tolist() for x in state["runs"]])
    print(json.dumps(row), flush=True)
json.dump(out, open(sys.argv[1], "w"))
print("ns: ramp = the last block's entry after the first's; sync, copy, data = after the block's entry: the first cluster")
print("barrier passed, the producer's first copy, consumer 1's first data; K loops, stores; end = last store to exit;")
print("exit4/exit3 = exit of blocks with the most / fewer tiles, from the first entry; clk4 = their clock64 entry to exit.")
print("Medians over blocks, then over 5 launches (each after an L2 flush).")
cols = ["span", "ramp", "sync", "copy", "data", "first_k", "k_loop", "store", "store90", "end", "exit4", "exit3", "clk4"]
print(f"{'variant':34s} {'event ms':>8s} " + " ".join(f"{c:>7s}" for c in cols))
for r in rows:
    print(f"{json.dumps(r['over'])[:34]:34s} {r['ms']:8.4f} " + " ".join(f"{r[c]:7.0f}" for c in cols))
