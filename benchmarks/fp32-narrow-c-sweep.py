"""Issue 45, FP32 "any shape": auto's choice beside a grid of pipelined and spread configurations on the
tuning shapes of benchmarks/fp32-narrow-c-tuning.toml (narrow C with long K, few rows with a wide N, mid C with
short K), on a GPU. The data behind TALL, EIGHT_BY_EIGHT_LEAST_SMS and SPLIT_ROWS in gemmlab/results/tuning.py;
benchmarks/h100-fp32-narrow-c/ holds its run on an H100 at af5a8ccdd563, whose "auto" rows are the rule before
those (2026-11-27). To make those files again, from the repository root on a GPU:

    OUT=benchmarks/h100-fp32-narrow-c
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/env.txt
    date -u +%FT%TZ >> $OUT/env.txt
    OUT=$OUT SWEEP_S=330 ROUNDS=3 PYTHONPATH=$PWD:$PWD/tests python3 benchmarks/fp32-narrow-c-sweep.py > $OUT/sweep.txt 2>&1

It writes $OUT/fp32-tune.json (every row, rewritten after each pass) and $OUT/fp32-summary.json; sweep.txt is
its log with the summary at the end (about 3 minutes on an H100).

Per shape (classes interleaved, so that a deadline cuts every class alike):
  stage 1: auto's choice (tuning.choose: the shipped cache, else the rule), the rule's own choice where the
           cache took it, and a grid of tiles (pipelined 64x64, 64x128, 128x64, 128x128; spread 64x128 BK 32,
           64x128 BK 16, 128x128; spread 64x64 on narrow and fewrows, 128x256 on midshort), each with K whole
           and at the K splits that fill 1, 2 and 4 blocks an SM (the rule's loop: a power of 2, slices of 64
           rows of K at least, at most 64 slices). 54 distinct configurations, 397 jobs on 15 shapes.
  stage 2: (all shapes' stage 1 first, then as time allows) the 2 best tile families of stage 1, each at its
           best split, with STAGES, BK/UNROLL, MINBLOCKS, GROUP_M, COALESCE_B and the split x2 and /2 changed
           one at a time (mutations()).
Every configuration is checked in its first round (prob.run checks on every input set before it times);
each pass times ROUNDS rounds in turn with cuBLAS (alternating order, >= 5 ms of repetitions, L2 flushed).
STAGED_C follows the rule: on where N % 4 != 0 and K is not split.

Writes $OUT/fp32-tune.json after every pass ({"meta", "rows"}); prints a table per shape and pass (auto vs
best vs cuBLAS) and at the end, per class, which fixed policy (tile family x split policy) has the best
geomean and minimum. SWEEP_S bounds the measuring (checked before each pass).

CPU modes (no GPU):  --plan            the plan, its size and time estimate
                     --compile [JOBS]  render and NVRTC-compile every configuration that can be run (stage 1
                                       and every stage-2 mutation of every stage-1 configuration) for sm_90:
                                       refused ones, failures, spills, registers
                     --summary FILE    the per-class summary from a saved fp32-tune.json (its "auto" is the
                                       rule the sweep ran with)
                     --project FILE    auto's choice now (cache, else the rule of this checkout) on each shape of
                                       a saved fp32-tune.json, and its x cuBLAS where that configuration was
                                       measured there (the mean of its passes; 'unknown' where it was not)
                     --fake FILE       write a fake fp32-tune.json (random times) to test --summary
"""
import json, math, os, random, sys, time
from pathlib import Path

import gemmlab
from gemmlab import catalog
from gemmlab.errors import GemmlabError
from gemmlab.results.model import Shape
from gemmlab.results import tuning

HERE = Path(__file__).resolve().parent
SHAPES = Path(os.environ.get("SHAPES", HERE / "fp32-narrow-c-tuning.toml"))
OUT = Path(os.environ.get("OUT", "/tmp"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SEED = int(os.environ.get("SEED", "45"))
SMS = 132
DEVICE = "NVIDIA H100 80GB HBM3"  # the shipped cache's key; the real name on a GPU
ARCH = "sm_90"
FILLS = (1, 2, 4)  # blocks an SM the split policies aim at (with K whole: split 1)
cat = catalog()

# tile families: (tag, variant, params without SPLIT_K / STAGED_C)
TILES = [
    ("P64x64", "pipelined", dict(BM=64, BN=64, WM=32, WN=32, TM=8, TN=4)),        # the rule's SMALL
    ("P64x128", "pipelined", dict(BM=64, BN=128, WM=32, WN=64, TM=8, TN=8)),      # the rule's MEDIUM
    ("P128x64", "pipelined", dict(BM=128, BN=64, WM=64, WN=32, TM=8, TN=8)),      # 4 warps of 64 x 32
    ("P128x128", "pipelined", dict(BM=128, BN=128, WM=32, WN=64, TM=8, TN=8)),    # 8 warps of 32 x 64
    ("S64x64", "spread", dict(BM=64, BN=64, WM=32, WN=32, TM=8, TN=4, BK=32, STAGES=3, UNROLL=8)),
    ("S64x128", "spread", dict(BM=64, BN=128, WM=32, WN=64, TM=8, TN=8, BK=32, STAGES=3, UNROLL=8)),  # SPREAD_MEDIUM
    ("S64x128k16", "spread", dict(BM=64, BN=128, WM=32, WN=64, TM=8, TN=8, BK=16, STAGES=3, UNROLL=4)),  # the cache's
    ("S128x128", "spread", dict(BM=128, BN=128, WM=64, WN=64, TM=16, TN=8, BK=32, STAGES=3, UNROLL=8)),
    ("S128x256", "spread", dict(BM=128, BN=256, WM=64, WN=64, TM=16, TN=8, BK=64, STAGES=2, UNROLL=8)),  # default
]
ONLY = {"S128x256": ("midshort",), "S64x64": ("narrow", "fewrows")}  # tiles tried on some classes only
SHOWN = ("BM", "BN", "WM", "WN", "TM", "TN", "BK", "UNROLL", "STAGES", "SPLIT_K")


def load_shapes():
    import tomllib
    data = tomllib.loads(SHAPES.read_text())
    shapes = [(s["name"], Shape(int(s["M"]), int(s["N"]), int(s["K"]))) for s in data["shapes"]]
    by = {}
    for name, s in shapes:
        by.setdefault(name, []).append(s)
    out, i = [], 0  # classes interleaved
    while any(by.values()):
        for name in list(by):
            if by[name]:
                out.append((name, by[name].pop(0)))
    return out


def tiles_of(p, shape):
    return math.ceil(shape.M / p["BM"]) * math.ceil(shape.N / p["BN"])


def split_for(tiles, K, fill, sms=SMS):
    """The rule's loop: double while the blocks make fewer than `fill` an SM and each slice keeps 64 rows."""
    split = 1
    while split < 64 and tiles * split < fill * sms and K // (2 * split) >= 32:
        split *= 2
    return split


def finish(vn, p, shape):
    """Resolved params with STAGED_C as the rule sets it (N % 4 != 0 and K whole)."""
    p = dict(p)
    p.setdefault("SPLIT_K", 1)
    if vn in ("pipelined", "spread"):
        p["STAGED_C"] = bool(shape.N % 4) and p["SPLIT_K"] == 1
    v = cat.get(vn)
    params = v.resolve(v.for_dtype("fp32", p))
    v.geometry(params, shape.M, shape.N, shape.K, SMS)  # refuses a launch this shape cannot take
    return params


def family(vn, p):
    keep = [k for k in p if k not in ("SPLIT_K", "STAGED_C", "DTYPE")]
    return vn + " " + " ".join(f"{k}={p[k]}" for k in sorted(keep))


def key(vn, p):
    return vn + " " + json.dumps({k: p[k] for k in sorted(p) if k != "DTYPE"}, sort_keys=True)


def label(vn, p):
    short = {"pipelined": "P", "spread": "S"}.get(vn, vn)
    if vn in ("pipelined", "spread"):
        s = (f"{short} {p['BM']}x{p['BN']}/{p['WM']}x{p['WN']}/{p['TM']}x{p['TN']} k{p['BK']}"
             + (f"u{p['UNROLL']}" if "UNROLL" in p else "") + f" st{p['STAGES']} sk{p['SPLIT_K']}")
        d = cat.get(vn).defaults()
        extra = [f"{k}={p[k]}" for k in ("GROUP_M", "MINBLOCKS", "COALESCE_B") if k in p and p[k] != d[k]]
        return s + (" " + " ".join(extra) if extra else "") + (" C" if p.get("STAGED_C") else "")
    return short + " " + " ".join(f"{k}={v}" for k, v in p.items() if k != "DTYPE" and v != cat.get(vn).defaults()[k])


def tiles_for(name):
    return [t for t in TILES if name in ONLY.get(t[0], (name,))]


def stage1(shape, device=DEVICE, sms=SMS, name=""):
    """[(tag, variant, params)]: auto's choice first, the rule's where the cache took auto, then the grid."""
    v, params, why = tuning.choose(cat, device, shape, sms)
    jobs = [("auto", v.name, params, why)]
    rn, rp, rwhy = tuning.rule(shape, sms)
    rv = cat.get(rn)
    rparams = rv.resolve(rv.for_dtype("fp32", rp))
    if key(rn, rparams) != key(v.name, params):
        jobs.append(("rule", rn, rparams, rwhy))
    for tag, vn, base in tiles_for(name):
        t = tiles_of(base, shape)
        for split in sorted({1} | {split_for(t, shape.K, f, sms) for f in FILLS}):
            jobs.append((tag, vn, finish(vn, dict(base, SPLIT_K=split), shape), ""))
    seen, out = set(), []
    for j in jobs:
        k = key(j[1], j[2])
        if k not in seen:
            seen.add(k)
            out.append(j)
    return out


def mutations(vn, p, shape):
    """One change at a time from a stage-1 configuration; those the template refuses are left out."""
    if vn not in ("pipelined", "spread"):
        return []
    base = {k: x for k, x in p.items() if k not in ("STAGED_C", "DTYPE")}
    ch = []
    for st in (2, 3, 4):
        if st != p["STAGES"]:
            ch.append(dict(STAGES=st))
    if vn == "pipelined":
        ch.append(dict(BK=16 if p["BK"] == 8 else 8))
        ch.append(dict(MINBLOCKS=2 if p["MINBLOCKS"] == 1 else 1))
    else:
        for bk, un, st in ((16, 4, 3), (16, 8, 3), (32, 8, 3), (32, 4, 3), (64, 8, 2)):
            if (bk, un, st) != (p["BK"], p["UNROLL"], p["STAGES"]):
                ch.append(dict(BK=bk, UNROLL=un, STAGES=st))
    if math.ceil(shape.M / p["BM"]) >= 8:
        ch.append(dict(GROUP_M=8))
    if shape.N % 4:
        ch.append(dict(COALESCE_B=True))
    for s in (p["SPLIT_K"] * 2, p["SPLIT_K"] // 2):
        if 1 <= s <= 64 and shape.K // s >= 32:
            ch.append(dict(SPLIT_K=s))
    out = []
    for c in ch:
        try:
            out.append(finish(vn, dict(base, **c), shape))
        except GemmlabError:
            pass
    return out


# ------------------------------------------------------------------------------------------ estimates

def est_kernel_ms(shape, tflops=25.0):
    return 2 * shape.M * shape.N * shape.K / (tflops * 1e12) * 1e3 + 0.006


def est_run_s(t_ms, overhead=0.10, flush_ms=0.09):
    """One prob.run: checks on 3 input sets (overhead), warm-up, >= 5 ms of repetitions, each after a
    256 MB L2 flush read (gemmlab/gpu/bench.py), and the check again."""
    warm = min(max(1, math.ceil(25.0 / t_ms)), 50)
    reps = max(10, math.ceil(5.0 / t_ms))
    return overhead + (1 + warm + reps) * (t_ms + flush_ms) * 1e-3


def est_pass_s(shape, n, rounds=ROUNDS):
    t = est_kernel_ms(shape)
    return 1.0 + rounds * ((n + 1) * est_run_s(t))  # + cuBLAS each round, + the Problem's inputs


# ------------------------------------------------------------------------------------------- measuring

def measure(prob, jobs, rounds, shape, name, stage):
    """jobs: [(tag, variant, params, why)] -> rows. Round 0 checks each configuration before timing it."""
    kernels, status, times, info = [], {}, {}, {}
    for i, (tag, vn, p, _) in enumerate(jobs):
        try:
            kernels.append(gemmlab.build(cat.get(vn), p, arch=ARCH))
        except GemmlabError as e:
            kernels.append(None)
            status[i] = "BUILD: " + str(e)[:200]
    cub = []
    for rnd in range(rounds):
        c = prob.cublas()
        cub.append(c.timing.median_ms if c.timing else None)
        order = range(len(jobs)) if rnd % 2 == 0 else reversed(range(len(jobs)))
        for i in order:
            if kernels[i] is None or status.get(i, "PASS") != "PASS":
                continue
            try:
                r = prob.run(kernels[i])
            except GemmlabError as e:
                status[i] = "ERROR: " + str(e)[:200]
                continue
            status[i] = r.status
            if r.fault:
                raise SystemExit(f"{jobs[i][0]} {label(jobs[i][1], jobs[i][2])} on {shape}: {r.fault} {r.error}"
                                 " (the CUDA context is gone)")
            if r.valid_time is not None:
                times.setdefault(i, []).append(r.valid_time)
            res = r.resources
            info[i] = dict(registers=getattr(res, "registers", None), spills=getattr(res, "spills", None),
                           blocks_per_sm=r.blocks_per_sm)
    cb = sorted(x for x in cub if x)
    cb = cb[len(cb) // 2] if cb else None
    rows = []
    for i, (tag, vn, p, why) in enumerate(jobs):
        t = sorted(times.get(i, []))
        ms = t[len(t) // 2] if t and status.get(i) == "PASS" else None
        rows.append(dict(name=name, shape=str(shape), M=shape.M, N=shape.N, K=shape.K, stage=stage, tag=tag,
                         variant=vn, params={k: x for k, x in p.items() if k != "DTYPE"}, key=key(vn, p),
                         family=family(vn, p), label=label(vn, p), why=why, ms=ms, rounds_ms=times.get(i, []),
                         status=status.get(i), cublas_ms=cb, cublas_rounds=cub,
                         x=(cb / ms if cb and ms else None), **info.get(i, {})))
    return rows


def table(rows, secs):
    r0 = rows[0]
    cb = r0["cublas_ms"]
    auto = [r for r in rows if r["tag"] in ("auto", "rule")]
    ok = sorted((r for r in rows if r["ms"]), key=lambda r: r["ms"])
    bad = [f"{r['label']}: {r['status']}" for r in rows if r["status"] != "PASS"]
    print(f"== {r0['name']} {r0['shape']} stage {r0['stage']} ({secs:.0f}s, {len(rows)} configs) "
          f"cuBLAS {cb * 1e3 if cb else float('nan'):.1f} us", flush=True)
    for r in auto:
        print(f"   {r['tag']:5} {r['label']:44} {(r['ms'] or float('nan')) * 1e3:8.1f} us  "
              f"{r['x'] or 0:.3f}x  {r['status']}", flush=True)
    for r in ok[:4]:
        print(f"   best  {r['label']:44} {r['ms'] * 1e3:8.1f} us  {r['x']:.3f}x  regs {r.get('registers')} "
              f"bps {r.get('blocks_per_sm')}", flush=True)
    if bad:
        print(f"   NOT PASS: {bad}", flush=True)


def save(rows, meta):
    tmp = OUT / "fp32-tune.json.tmp"
    tmp.write_text(json.dumps({"meta": meta, "rows": rows}))
    tmp.replace(OUT / "fp32-tune.json")


def main():
    import functools
    import gemmlab.gpu.problem as P
    import gemmlab.gpu.bench as B
    from gemmlab.gpu.device import get_device
    from gemmlab.render import render
    from gemmlab.grid import compile_all
    P.bench = functools.partial(B.bench, min_time_ms=5.0)
    t_start = time.time()
    deadline = t_start + float(os.environ.get("SWEEP_S", "330"))
    dev = get_device()
    shapes = load_shapes()
    plan = [(name, s, stage1(s, dev.name, dev.sms, name)) for name, s in shapes]
    meta = dict(device=dev.name, sms=dev.sms, commit=os.environ.get("GEMMLAB_COMMIT"), rounds=ROUNDS, seed=SEED,
                shapes=str(SHAPES), date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                what="issue 45 FP32 tuning sweep (benchmarks/fp32-narrow-c-sweep.py): stage 1 grid, stage 2 mutations")
    rendered = {}
    for _, _, jobs in plan:
        for _, vn, p, _ in jobs:
            r = render(cat.get(vn), p)
            rendered[r.source] = r
    errs = compile_all(list(rendered.values()), ARCH)
    est = sum(est_pass_s(s, len(j)) for _, s, j in plan)
    print(f"{dev.name}, {dev.sms} SMs; {len(plan)} shapes, {sum(len(j) for *_, j in plan)} stage-1 jobs, compiled "
          f"{len(rendered)} in {time.time() - t_start:.0f}s, {sum(e is not None for e in errs)} failed; stage 1 "
          f"estimated {est:.0f}s", flush=True)
    for e in errs:
        if e:
            print("   compile:", e[:300], flush=True)
    rows = []
    for stage in (1, 2):
        for name, shape, jobs in plan:
            if stage == 2:
                mine = [r for r in rows if r["shape"] == str(shape) and r["stage"] == 1 and r["ms"]
                        and r["variant"] in ("pipelined", "spread")]
                best = {}
                for r in sorted(mine, key=lambda r: r["ms"]):
                    best.setdefault(r["family"], r)
                parents = sorted(best.values(), key=lambda r: r["ms"])[:2]
                jobs, seen = [], set()
                auto = next((r for r in rows if r["shape"] == str(shape) and r["tag"] == "auto"), None)
                if auto:
                    jobs.append(("auto", auto["variant"], dict(auto["params"]), auto["why"]))
                for par in parents:
                    pp = dict(par["params"])
                    jobs.append(("parent", par["variant"], pp, par["key"]))
                    jobs += [("mut", par["variant"], m, par["key"]) for m in mutations(par["variant"], pp, shape)]
                dedup = []
                for j in jobs:
                    k = key(j[1], {kk: vv for kk, vv in j[2].items()})
                    if k not in seen:
                        seen.add(k)
                        dedup.append(j)
                jobs = dedup
                if len(jobs) <= 1:
                    continue
                new = {}
                for _, vn, p, _ in jobs:
                    r = render(cat.get(vn), p)
                    new[r.source] = r
                compile_all(list(new.values()), ARCH)
            left = deadline - time.time()
            need = est_pass_s(shape, len(jobs)) + (3 if stage == 2 else 0)  # stage 2 compiles its own
            if left < (need if stage == 2 else 0):
                print(f"deadline: stage {stage} stopped before {name} {shape} ({left:.0f}s left, ~{need:.0f}s "
                      "needed)", flush=True)
                break
            t1 = time.time()
            import cupy
            cupy.get_default_memory_pool().free_all_blocks()
            prob = P.Problem(shape, seed=SEED, dtype="fp32")
            rs = measure(prob, jobs, ROUNDS, shape, name, stage)
            del prob
            rows += rs
            table(rs, time.time() - t1)
            save(rows, dict(meta, elapsed_s=round(time.time() - t_start, 1)))
    print(f"measured in {time.time() - t_start:.0f}s", flush=True)
    (OUT / "fp32-summary.json").write_text(json.dumps(summary(rows), indent=1))


# -------------------------------------------------------------------------------------------- summary

def g(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def summary(rows):
    """Per class: auto, the best measured per shape, and fixed policies (a stage-1 tile family at the split
    that fills f blocks an SM, for every f of FILLS and f=0 for K whole; 'best' the best split per shape)."""
    by_shape = {}
    for r in rows:
        by_shape.setdefault((r["name"], r["shape"]), []).append(r)
    classes = {}
    for (name, s), rs in by_shape.items():
        classes.setdefault(name, []).append(s)
    out = {}
    for name, shapes in list(classes.items()) + [("all", [s for ss in classes.values() for s in ss])]:
        auto_x, best_x, lines = [], [], []
        pol = {}  # (family tag, policy) -> [x]
        for s in shapes:
            rs = [r for (n, ss), v in by_shape.items() if ss == s for r in v]
            a = next((r for r in rs if r["tag"] == "auto" and r["stage"] == 1), None)
            if a and a["x"]:
                auto_x.append(a["x"])
            xs = [r["x"] for r in rs if r["x"]]
            if xs:
                best_x.append(max(xs))
            st1 = {r["key"]: r for r in rs if r["stage"] == 1}
            M, N, K = (int(x) for x in s.split("x"))
            shape = Shape(M, N, K)
            for tag, vn, base in tiles_for(name if name != "all" else ""):
                t = tiles_of(base, shape)
                got = {}
                for f in (0,) + FILLS:
                    split = 1 if f == 0 else split_for(t, K, f)
                    try:
                        p = finish(vn, dict(base, SPLIT_K=split), shape)
                    except GemmlabError:
                        continue
                    r = st1.get(key(vn, p))
                    if r and r["x"]:
                        got[f] = r["x"]
                        pol.setdefault((tag, f"fill {f}" if f else "K whole"), []).append(r["x"])
                if got:
                    pol.setdefault((tag, "best split"), []).append(max(got.values()))
        n = len(shapes)
        full = [(g(xs), min(xs), tag, p) for (tag, p), xs in pol.items() if len(xs) == n]
        print(f"## {name}: {n} shapes; auto geomean {g(auto_x):.3f} min {min(auto_x, default=float('nan')):.3f}; "
              f"best measured per shape geomean {g(best_x):.3f} min {min(best_x, default=float('nan')):.3f}")
        print("   fixed policies by geomean (x cuBLAS):   geomean   min   family / split policy")
        for gx, mn, tag, p in sorted(full, key=lambda x: -x[0])[:8]:
            print(f"   {'':38} {gx:.3f}  {mn:.3f}   {tag} / {p}")
        print("   by minimum:")
        for gx, mn, tag, p in sorted(full, key=lambda x: -x[1])[:4]:
            print(f"   {'':38} {gx:.3f}  {mn:.3f}   {tag} / {p}")
        out[name] = dict(shapes=n, auto_geomean=g(auto_x), auto_min=min(auto_x, default=None),
                         best_geomean=g(best_x), best_min=min(best_x, default=None),
                         policies=sorted(([t, p, gx, mn] for gx, mn, t, p in full), key=lambda x: -x[2]))
    # stage 2: what each kind of change did to its parent (same pass, same cuBLAS)
    gains = {}
    for (name, s), rs in by_shape.items():
        par = {r["key"]: r for r in rs if r["stage"] == 2 and r["tag"] == "parent" and r["ms"]}
        for r in rs:
            pr = par.get(r["why"]) if r["stage"] == 2 and r["tag"] == "mut" and r["ms"] else None
            if not pr:
                continue
            diff = {k: v for k, v in r["params"].items() if k != "STAGED_C" and pr["params"].get(k) != v}
            sk = diff.pop("SPLIT_K", None)
            d = " ".join(f"{k}={v}" for k, v in sorted(diff.items()))
            if sk:
                d = "SPLIT_K x2" if sk > pr["params"]["SPLIT_K"] else "SPLIT_K /2"
            gains.setdefault((r["variant"], d), []).append(pr["ms"] / r["ms"])
    if gains:
        print("## stage 2: a change's speed-up over its parent (geomean, min, max, shapes)")
        for (vn, d), xs in sorted(gains.items(), key=lambda x: -g(x[1])):
            print(f"   {vn:9} {d:28} {g(xs):.3f}  {min(xs):.3f}  {max(xs):.3f}  {len(xs)}")
    print("## per shape: cuBLAS us | auto us (x) | best measured (x)")
    for (name, s), rs in by_shape.items():
        a = next((r for r in rs if r["tag"] == "auto" and r["stage"] == 1), None)
        ok = [r for r in rs if r["x"]]
        b = max(ok, key=lambda r: r["x"]) if ok else None
        if a and b:
            print(f"   {name:9} {s:15} {a['cublas_ms'] * 1e3:7.1f} | {(a['ms'] or 0) * 1e3:7.1f} ({a['x'] or 0:.3f}) "
                  f"{a['label']} | {b['ms'] * 1e3:7.1f} ({b['x']:.3f}) {b['label']} [stage {b['stage']}]")
    out["stage2_gains"] = {f"{vn} {d}": [g(xs), min(xs), max(xs), len(xs)] for (vn, d), xs in gains.items()}
    return out


# ---------------------------------------------------------------------------------------- CPU modes

def project(rows):
    """auto's choice of this checkout on the shapes of `rows`, priced only by what was measured there."""
    xs = {}
    for r in rows:
        if r["x"]:
            xs.setdefault((r["shape"], r["key"]), []).append(r["x"])
    got, unknown = [], 0
    for name, s in dict.fromkeys((r["name"], r["shape"]) for r in rows):
        shape = Shape(*(int(x) for x in s.split("x")))
        v, p, why = tuning.choose(cat, DEVICE, shape, SMS)
        m = xs.get((s, key(v.name, p)))
        x = sum(m) / len(m) if m else None
        if x:
            got.append((name, x))
        else:
            unknown += 1
        print(f"{name:9} {s:15} {f'{x:.3f}' if x else 'unknown':7} {label(v.name, p):48} {why[:70]}")
    for c in sorted({n for n, _ in got}) + ["all"]:
        cx = [x for n, x in got if c in ("all", n)]
        print(f"## {c}: geomean {g(cx):.3f} min {min(cx):.3f}, {sum(x >= 1 for x in cx)} of {len(cx)} at 1.0x or more"
              + (f"; {unknown} unknown" if c == "all" and unknown else ""))


def full_grid():
    """Every (variant, params) this sweep may run on these shapes: stage 1 and the mutations of every
    stage-1 configuration."""
    grid, refused = {}, []
    for name, s in load_shapes():
        try:
            jobs = stage1(s, name=name)
        except GemmlabError as e:
            refused.append((str(s), "stage 1", str(e)))
            continue
        for tag, vn, p, _ in jobs:
            grid.setdefault(key(vn, p), (vn, p))
            for m in mutations(vn, p, s):
                grid.setdefault(key(vn, m), (vn, m))
    return grid, refused


def plan_mode():
    total = 0.0
    n1 = 0
    for name, s in load_shapes():
        jobs = stage1(s, name=name)
        n1 += len(jobs)
        e1 = est_pass_s(s, len(jobs))
        # stage 2: auto + 2 parents with their mutations
        n2 = 1 + sum(1 + len(mutations(vn, p, s)) for _, vn, p, _ in
                     [j for j in jobs if j[1] in ("pipelined", "spread")][:2])
        e2 = est_pass_s(s, n2)
        total += e1 + e2
        print(f"{name:9} {str(s):15} {2 * s.M * s.N * s.K / 1e9:6.2f} GFLOP  est kernel {est_kernel_ms(s) * 1e3:6.1f} us"
              f"  stage 1 {len(jobs):3d} jobs ~{e1:5.1f}s  stage 2 ~{n2:3d} jobs ~{e2:5.1f}s   auto: "
              f"{label(jobs[0][1], jobs[0][2])}")
        for tag, vn, p, _ in jobs:
            print(f"      {tag:11} {label(vn, p)}")
    grid, refused = full_grid()
    print(f"stage 1: {n1} jobs; estimated {total:.0f}s for both stages at {ROUNDS} rounds "
          f"(+ compile and start-up); {len(grid)} distinct configurations in the whole grid; refused: {refused}")


def compile_mode(jobs):
    from gemmlab.grid import build_all
    grid, refused = full_grid()
    plan = [(cat.get(vn), p) for vn, p in grid.values()]
    t0 = time.time()
    rows, stopped = build_all(plan, ARCH, jobs=jobs)
    bad = [r for r in rows if r["result"] != "ok"]
    spills = [r for r in rows if r["result"] == "ok" and (r["spills"] or r["stack"])]
    regs = {}
    for r in rows:
        if r["result"] == "ok":
            regs.setdefault(r["variant"], []).append(r["registers"])
    print(f"compiled {len(rows)} configurations for {ARCH} in {time.time() - t0:.0f}s: {len(bad)} failed, "
          f"{len(spills)} with spills or a stack frame, refused at planning: {len(refused)}")
    for r in bad:
        print("  FAIL", r["variant"], r["params"], r["error"][:400])
    for r in spills:
        print("  SPILL", label(r["variant"], r["params"]), r["registers"], r["spills"], r["stack"])
    for vn, rg in regs.items():
        print(f"  {vn}: registers {min(rg)}-{max(rg)}")
    (OUT / "compile-check.json").write_text(json.dumps(
        [dict(label=label(r["variant"], r["params"]), **{k: r.get(k) for k in
              ("variant", "params", "result", "registers", "spills", "stack", "smem", "error")}) for r in rows]))
    return 1 if bad or spills or refused else 0


def fake_mode(path):
    rng = random.Random(1)
    rows = []
    for name, s in load_shapes():
        jobs = stage1(s, name=name)
        fake = lambda p: est_kernel_ms(s) * rng.uniform(0.7, 1.6)
        cb = est_kernel_ms(s)
        for stage in (1, 2):
            if stage == 2:
                ok = [r for r in rows if r["shape"] == str(s) and r["stage"] == 1
                      and r["variant"] in ("pipelined", "spread")]
                par = sorted(ok, key=lambda r: r["ms"])[:2]
                jobs = [("parent", r["variant"], dict(r["params"]), r["key"]) for r in par]
                for r in par:
                    jobs += [("mut", r["variant"], m, r["key"]) for m in mutations(r["variant"], r["params"], s)]
            for tag, vn, p, why in jobs:
                ms = fake(p)
                rows.append(dict(name=name, shape=str(s), M=s.M, N=s.N, K=s.K, stage=stage, tag=tag, variant=vn,
                                 params={k: x for k, x in p.items() if k != "DTYPE"}, key=key(vn, p),
                                 family=family(vn, p), label=label(vn, p), why=why, ms=ms, rounds_ms=[ms] * 3,
                                 status="PASS", cublas_ms=cb, cublas_rounds=[cb] * 3, x=cb / ms))
    Path(path).write_text(json.dumps({"meta": {"fake": True}, "rows": rows}))
    print(f"wrote {len(rows)} fake rows to {path}")


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["--plan"]:
        plan_mode()
    elif a[:1] == ["--compile"]:
        sys.exit(compile_mode(int(a[1]) if len(a) > 1 else None))
    elif a[:1] == ["--summary"]:
        d = json.load(open(a[1]))
        json.dump(summary(d["rows"] if isinstance(d, dict) else d), sys.stdout, indent=1)
        print()
    elif a[:1] == ["--project"]:
        d = json.load(open(a[1]))
        project(d["rows"] if isinstance(d, dict) else d)
    elif a[:1] == ["--fake"]:
        fake_mode(a[1])
    else:
        main()
