"""Decode on the tensor cores, 16 to 128 rows of C with a B of at most 64 MB (issue 45; the rule is
wgmma_decode_rule in gemmlab/results/tuning.py), on a GPU:
1. Time wgmma configurations (64-row tiles, with and without MMA_IN_FLIGHT, K split by a policy of blocks an
   SM) beside cuBLAS on hold-out projections (not Llama-3's), in one process: every configuration checked,
   then 2 rounds in turn with cuBLAS, >= 5 ms of repetitions each (L2 flushed).
2. Pick, from those numbers alone, the (tile, split policy) with the best geomean x cuBLAS per class of rows
   (16-64, 65-128).
3. Then time Llama-3's small-B decode rows (8B qkv and o) with the rule's choice and the picked one, 3 rounds
   in turn with cuBLAS.
Writes $OUT/tune.json, pick.json and judge.json (benchmarks/h100-decode-in-flight-bf16-tuning.json holds
them); SWEEP_S bounds step 1's seconds."""
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
# (name, N, K): hold-out projections with B of 19-63 MB
TUNE = [("qwen2-7b qkv", 4608, 3584), ("nemo o", 5120, 4096), ("phi3 down", 3072, 8192),
        ("l2-13b o", 5120, 5120), ("qwen2-7b o", 3584, 3584), ("nemo qkv", 6144, 5120)]
JUDGE = [("llama3-8b qkv", 6144, 4096), ("llama3-8b o", 4096, 4096)]
MS = (16, 64, 128)
# tiles (variant, BM, BN, STAGES) and the splits swept for each
# (variant, BM, BN, STAGES, MMA_IN_FLIGHT)
TILES = [("wgmma", 64, 64, 4, 0), ("wgmma", 64, 64, 4, 1), ("wgmma", 64, 128, 4, 1), ("wgmma", 64, 64, 8, 1),
         ("wgmma", 64, 64, 12, 1), ("wgmma", 128, 64, 4, 1)]
SPLITS = {(64, 64, 4, 0): (2, 4), (64, 64, 4, 1): (1, 2, 4, 8), (64, 128, 4, 1): (1, 2, 4), (64, 64, 8, 1): (1, 2),
          (64, 64, 12, 1): (1, 2), (128, 64, 4, 1): (2, 4)}
BPS = (0, 1, 2, 3, 4, 6, 8)  # split policy: K split until the blocks fill bps blocks an SM (0: no split)


def cfg(t, s):
    v, bm, bn, st, pf = t
    p = {"BM": bm, "BN": bn, "STAGES": st}
    if pf:
        p["MMA_IN_FLIGHT"] = pf
    if s > 1:
        p["SPLIT_K"] = s
    return (v, p)


def cands(M, N, K):
    out = []
    for t in TILES:
        if t[1] == 128 and M <= 64:
            continue
        for s in SPLITS[t[1:]]:
            if K // (64 * s) >= 4:
                out.append(cfg(t, s))
    if M > 64:
        pass
    return out


def key(vn, p):
    return vn + " " + " ".join(f"{k}={p[k]}" for k in ("BM", "BN", "STAGES", "SPLIT_K", "MMA_IN_FLIGHT", "CLUSTER_M") if k in p)


def spec_cfg(spec, M, N, K):
    """The configuration a (tile, policy) spec gives at a shape, or None."""
    t, bps = spec
    if t[0] == "wgmma_ws":
        return (t[0], dict(t[1]))
    if t[1] == 128 and M <= 64:
        return None
    tiles = math.ceil(M / t[1]) * math.ceil(N / t[2])
    s = 1 if bps == 0 else tuning.split_k(tiles, K, 64, 32, bps * SMS)
    return cfg(t, s)


SPECS = [(t, b) for t in TILES for b in BPS]


def measure(shape, jobs, rounds, tag):
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
        order = range(len(jobs)) if rnd % 2 == 0 else reversed(range(len(jobs)))
        for i in order:
            if status.get(i, "PASS") != "PASS":
                continue
            r = prob.run(kernels[i])
            status[i] = r.status
            if r.timing:
                times[i].append(r.timing.median_ms)
    cb = sorted(x for x in cub if x)
    cb = cb[len(cb) // 2] if rounds % 2 else sum(cb) / len(cb)
    rows = []
    for i, (vn, p) in enumerate(jobs):
        t = sorted(times[i])
        ms = (t[len(t) // 2] if rounds % 2 else sum(t) / len(t)) if t else None
        rows.append(dict(tag=tag, shape=str(shape), M=shape.M, N=shape.N, K=shape.K, variant=vn, params=p,
                         key=key(vn, p), ms=ms, rounds_ms=times[i], status=status.get(i), cublas_ms=cb,
                         cublas_rounds=cub))
    return rows


def main():
    import gemmlab.gpu.problem as P
    import gemmlab.gpu.bench as B
    P.bench = functools.partial(B.bench, min_time_ms=5.0)
    plan = []
    for name, N, K in TUNE:
        for M in MS:
            shape = Shape(M, N, K)
            rn, rp, _ = tuning.tensor_rule(shape, "bf16", SMS)
            jobs, seen = [], set()
            for vn, p in [(rn, rp)] + cands(M, N, K):
                if key(vn, p) not in seen:
                    seen.add(key(vn, p))
                    jobs.append((vn, p))
            plan.append((name, shape, jobs, key(rn, rp)))
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
    deadline = time.time() + float(os.environ.get("SWEEP_S", "60"))
    rows, done = [], []
    # interleave the M classes so that a deadline leaves each with shapes
    for name, shape, jobs, rk in sorted(plan, key=lambda x: (TUNE.index(next(t for t in TUNE if t[0] == x[0])), x[1].M)):
        if time.time() > deadline:
            print("deadline: stopped before", name, shape, flush=True)
            break
        t1 = time.time()
        rs = measure(shape, jobs, 2, "tune")
        for r in rs:
            r["name"], r["rule"] = name, r["key"] == rk
        rows += rs
        done.append(shape)
        best = sorted((r for r in rs if r["ms"]), key=lambda r: r["ms"])
        rule = next(r for r in rs if r["rule"])
        print(f"== {name} {shape} cuBLAS {rs[0]['cublas_ms'] * 1e3:.1f} us ({time.time() - t1:.0f}s); rule "
              f"{rule['key']} {rule['ms'] * 1e3:.1f}; best " + "; ".join(f"{r['key']} {r['ms'] * 1e3:.1f}" for r in best[:3]),
              flush=True)
        json.dump(rows, open(f"{OUT}/tune.json", "w"))
    # 2. the pick
    by = {}
    for r in rows:
        by.setdefault(r["shape"], {})[r["key"]] = r
    pick = {}
    for cls, ms in (("16-64", (16, 64)), ("65-128", (128,))):
        shapes = [s for s in done if s.M in ms]
        score = []
        for spec in SPECS:
            xs = []
            for s in shapes:
                c = spec_cfg(spec, s.M, s.N, s.K)
                r = c and by[str(s)].get(key(*c))
                if not r or not r["ms"] or r["status"] != "PASS":
                    xs = None
                    break
                xs.append(r["cublas_ms"] / r["ms"])
            if xs:
                score.append((math.exp(sum(map(math.log, xs)) / len(xs)), min(xs), spec))
        rule_x = [by[str(s)][next(k for k, r in by[str(s)].items() if r["rule"])] for s in shapes]
        rule_x = [r["cublas_ms"] / r["ms"] for r in rule_x]
        best_x = [max(r["cublas_ms"] / r["ms"] for r in by[str(s)].values() if r["ms"]) for s in shapes]
        g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
        print(f"## class {cls}: {len(shapes)} shapes; rule geomean {g(rule_x):.3f} min {min(rule_x):.3f}; "
              f"per-shape best {g(best_x):.3f}")
        score.sort(key=lambda x: -x[0])
        for gx, mn, spec in score[:8]:
            print(f"   {gx:.3f} min {mn:.3f}  {spec}")
        pick[cls] = score[0][2]
    json.dump({"pick": {k: repr(v) for k, v in pick.items()}}, open(f"{OUT}/pick.json", "w"))
    # 3. Llama-3's small-B decode rows: the old rule against the pick
    jrows = []
    for name, N, K in JUDGE:
        for M in MS:
            shape = Shape(M, N, K)
            rn, rp, _ = tuning.tensor_rule(shape, "bf16", SMS)
            new = spec_cfg(pick["16-64" if M <= 64 else "65-128"], M, N, K)
            jobs = [(rn, rp)] + ([new] if key(*new) != key(rn, rp) else [])
            rs = measure(shape, jobs, 3, "judge")
            rs[0]["old_rule"] = True
            rs[-1]["new_rule"] = True
            for r in rs:
                r["name"] = name
            jrows += rs
            print(f"== {name} {shape} cuBLAS {rs[0]['cublas_ms'] * 1e3:.1f}; old {rs[0]['key']} {rs[0]['ms'] * 1e3:.1f} "
                  f"({rs[0]['cublas_ms'] / rs[0]['ms']:.3f}x); new {rs[-1]['key']} {rs[-1]['ms'] * 1e3:.1f} "
                  f"({rs[-1]['cublas_ms'] / rs[-1]['ms']:.3f}x)", flush=True)
            json.dump(jrows, open(f"{OUT}/judge.json", "w"))


if __name__ == "__main__":
    main()
