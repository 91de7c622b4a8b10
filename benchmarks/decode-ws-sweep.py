"""Decode on the tensor cores with a B of at most 64 MB: wgmma_ws's 64-row tiles (one consumer warpgroup beside
the TMA producer, deep rings, K split over blockIdx.z), the tuning behind WS_DECODE_TILES in
gemmlab/results/tuning.py (issue 45), on a GPU:
1. Tuning shapes (NOT Llama-3's): Qwen2-7B qkv 4608x3584 and o 3584x3584, Mistral-Nemo o 5120x4096, Llama-2-13B
   o 5120x5120, at 16, 64 and 128 rows. Per shape: the rule's choice (tuning.tensor_rule) and wgmma_ws BM=64 at
   STAGES 4..12, BN 64/128, SPLIT_K 1/2/4, all checked, then ROUNDS rounds in turn with cuBLAS (>= 5 ms of
   repetitions each, L2 flushed). SWEEP_S bounds step 1's seconds.
2. Per class of rows (WS_DECODE_TILES' bounds), the (BN, STAGES) with the best geomean x cuBLAS over the
   tuning shapes, each at the split the rule would take (K split while the blocks stay in one wave).
3. Llama-3 8B qkv 6144x4096 and o 4096x4096 at 16, 64, 128 rows: the rule's choice, 3 rounds with cuBLAS.
Writes $OUT/tune.json, pick.json and judge.json (benchmarks/h100-decode-ws-bf16-tuning.json holds them).
`python3 benchmarks/decode-ws-sweep.py TUNE_JSON` redoes step 2 alone from a saved tune.json, without a GPU."""
import functools, json, math, os, sys, time
import gemmlab
from gemmlab import catalog
from gemmlab.results.model import Shape
from gemmlab.results import tuning
from gemmlab.render import render
from gemmlab.grid import compile_all

cat = catalog()
SMS = 132
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
TUNE = [("qwen2-7b qkv", 4608, 3584), ("qwen2-7b o", 3584, 3584), ("nemo o", 5120, 4096), ("l2-13b o", 5120, 5120)]
JUDGE = [("llama3-8b qkv", 6144, 4096), ("llama3-8b o", 4096, 4096)]
MS = (16, 64, 128)
BASE = {"BM": 64, "CLUSTER_M": 1, "STREAM_K": False, "GPC_ORDER": False}
WS = []  # (BN, STAGES, SPLIT_K): 64 x 128 tiles fit 8 stages at most
for bn, stages in [(64, s) for s in (4, 6, 8, 10, 12)] + [(128, s) for s in (4, 6, 8)]:
    for split in (1, 2, 4):
        WS.append((bn, stages, split))


def ws(bn, stages, split):
    p = dict(BASE, BN=bn, STAGES=stages, SPLIT_K=split)
    if split > 1:
        p["STAGED_STORE"] = False
    return ("wgmma_ws", p)


def key(vn, p):
    return vn + " " + " ".join(f"{k}={p[k]}" for k in ("BM", "BN", "STAGES", "SPLIT_K", "MMA_IN_FLIGHT") if k in p)


def measure(shape, jobs, rounds):
    import cupy
    import gemmlab.gpu.problem as P
    cupy.get_default_memory_pool().free_all_blocks()
    prob = P.Problem(shape, seed=45, dtype="bf16")
    kernels = []
    for vn, p in jobs:
        v = cat.get(vn)
        kernels.append(gemmlab.build(v, v.resolve(v.for_dtype("bf16", p)), arch="sm_90"))
    times, status, cub = {i: [] for i in range(len(jobs))}, {}, []
    for rnd in range(rounds):
        c = prob.cublas()
        cub.append(c.timing.median_ms if c.timing else None)
        for i in (range(len(jobs)) if rnd % 2 == 0 else reversed(range(len(jobs)))):
            if status.get(i, "PASS") != "PASS":
                continue
            r = prob.run(kernels[i])
            status[i] = r.status
            if r.timing:
                times[i].append(r.timing.median_ms)
    cb = sorted(x for x in cub if x)
    cb = cb[len(cb) // 2]
    rows = []
    for i, (vn, p) in enumerate(jobs):
        t = sorted(times[i])
        rows.append(dict(shape=str(shape), M=shape.M, N=shape.N, K=shape.K, variant=vn, params=p, key=key(vn, p),
                         ms=t[len(t) // 2] if t else None, rounds_ms=times[i], status=status.get(i), cublas_ms=cb,
                         cublas_rounds=cub))
    return rows


def g(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def choose(rows):
    """Per class of rows, the (BN, STAGES) whose configurations, at the split the rule takes on each shape,
    have the best geomean x cuBLAS; printed with the rule's own geomean on the same shapes."""
    by = {}
    for r in rows:
        by.setdefault((r["M"], r["N"], r["K"]), {})[r["key"]] = r
    pick, low = {}, 0
    for most, _, _ in tuning.WS_DECODE_TILES:
        shapes = [s for s in by if low < s[0] <= most]
        low, score = most, []
        if not shapes:
            continue
        rule_x = [r["cublas_ms"] / r["ms"] for s in shapes for r in by[s].values() if r.get("rule") and r["ms"]]
        for bn, st in sorted({(c[0], c[1]) for c in WS}):
            xs = []
            for M, N, K in shapes:
                split = tuning.split_k(math.ceil(M / 64) * math.ceil(N / bn), K, 64, 32, SMS)
                r = by[(M, N, K)].get(key(*ws(bn, st, split)))
                if r and r["ms"] and r["status"] == "PASS":
                    xs.append(r["cublas_ms"] / r["ms"])
            if len(xs) == len(shapes):
                score.append((g(xs), min(xs), bn, st))
        score.sort(key=lambda x: -x[0])
        print(f"## up to {most} rows, {len(shapes)} shapes: rule geomean {g(rule_x):.3f}x cuBLAS "
              f"(min {min(rule_x):.3f}); K split while the blocks stay in one wave")
        print("   geomean   min   BN STAGES")
        for gx, mn, bn, st in score[:6]:
            print(f"   {gx:.3f}   {mn:.3f}  {bn:4d} {st:6d}")
        if score:
            pick[most] = score[0][2:]
    return pick


def main():
    import gemmlab.gpu.problem as P
    import gemmlab.gpu.bench as B
    P.bench = functools.partial(B.bench, min_time_ms=5.0)
    plan = []
    for name, N, K in TUNE:
        for M in MS:
            shape = Shape(M, N, K)
            rn, rp, _ = tuning.tensor_rule(shape, "bf16", SMS)
            plan.append((name, shape, [(rn, rp)] + [ws(*c) for c in WS], key(rn, rp)))
    rendered = {}
    for _, _, jobs, _ in plan:
        for vn, p in jobs:
            v = cat.get(vn)
            r = render(v, v.resolve(v.for_dtype("bf16", p)))
            rendered[r.source] = r
    t0 = time.time()
    errs = compile_all(list(rendered.values()), "sm_90")
    print(f"{len(plan)} shapes, {sum(len(j) for _, _, j, _ in plan)} jobs, compiled {len(rendered)} in "
          f"{time.time() - t0:.0f}s, {sum(e is not None for e in errs)} failed", flush=True)
    deadline = time.time() + float(os.environ.get("SWEEP_S", "120"))
    rows, done = [], []
    for name, shape, jobs, rk in sorted(plan, key=lambda x: ([t[0] for t in TUNE].index(x[0]), x[1].M)):
        if time.time() > deadline:
            print("deadline: stopped before", name, shape, flush=True)
            break
        t1 = time.time()
        rs = measure(shape, jobs, ROUNDS)
        rs[0]["rule"] = True
        for r in rs:
            r["name"] = name
        rows += rs
        done.append(shape)
        ok = sorted((r for r in rs[1:] if r["ms"]), key=lambda r: r["ms"])
        bad = [r["key"] + " " + str(r["status"]) for r in rs if r["status"] != "PASS"]
        cb = rs[0]["cublas_ms"]
        print(f"== {name} {shape} ({time.time() - t1:.0f}s) cuBLAS {cb * 1e3:.1f} us | rule {rs[0]['key']} "
              f"{(rs[0]['ms'] or float('nan')) * 1e3:.1f} ({cb / rs[0]['ms'] if rs[0]['ms'] else 0:.3f}x) | best ws "
              + "; ".join(f"BN={r['params']['BN']} ST={r['params']['STAGES']} SK={r['params']['SPLIT_K']} "
                          f"{r['ms'] * 1e3:.1f} ({cb / r['ms']:.3f}x)" for r in ok[:3])
              + (f" | NOT PASS: {bad}" if bad else ""), flush=True)
        json.dump(rows, open(f"{OUT}/tune.json", "w"))
    pick = choose(rows)
    json.dump({"pick": pick}, open(f"{OUT}/pick.json", "w"))
    jrows = []
    for name, N, K in JUDGE:
        for M in MS:
            shape = Shape(M, N, K)
            rn, rp, _ = tuning.tensor_rule(shape, "bf16", SMS)
            rs = measure(shape, [(rn, rp)], 3)
            for r in rs:
                r["name"] = name
            jrows += rs
            cb = rs[0]["cublas_ms"]
            x = cb / rs[0]["ms"] if rs[0]["ms"] else 0
            print(f"== {name} {shape} cuBLAS {cb * 1e3:.1f} us; rule {rs[0]['key']} {(rs[0]['ms'] or 0) * 1e3:.1f} "
                  f"({x:.3f}x) {rs[0]['status']}", flush=True)
            json.dump(jrows, open(f"{OUT}/judge.json", "w"))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(choose(json.load(open(sys.argv[1])))))
    else:
        main()
