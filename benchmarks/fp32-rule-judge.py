"""A candidate FP32 rule against this checkout's, judged on shapes it was not tuned on: fresh random FP32 shapes
(suites.random_shapes, the seed drawn at run time) where the two rules choose differently and the tuning cache
does not take the shape (M x N x K up to 2e11, for time); each choice run with `gemmlab run --rounds 3` (checked
element by element, then 3 rounds in turn with cuBLAS). On a GPU, from the repository root:

    git show REV:gemmlab/results/tuning.py > /tmp/candidate.py
    OUT=DIR JUDGE_S=120 WANT=12 python3 benchmarks/fp32-rule-judge.py /tmp/candidate.py

Writes DIR/fp32-rule-judge.json (the seed, each shape's two rows) and prints each shape and the geomeans."""
import importlib.util, json, math, os, secrets, subprocess, sys, time
from gemmlab import suites
from gemmlab.results import tuning as old
spec = importlib.util.spec_from_file_location("gemmlab.results.tuning_new", sys.argv[1])
new = importlib.util.module_from_spec(spec); spec.loader.exec_module(new)
OUT, END, WANT = os.environ.get("OUT", "/tmp"), float(os.environ.get("JUDGE_S", "170")), int(os.environ.get("WANT", "12"))
seed = secrets.randbelow(2**31)
dev = os.environ.get("DEVICE", "NVIDIA H100 80GB HBM3")
picked, drawn = [], 0
for e in suites.random_shapes(3000, seed, "fp32").entries:
    s = e.shape; drawn += 1
    if s.M * s.N * s.K > 2e11 or old.cached(dev, s, "fp32"):
        continue
    a, b = old.rule(s, 132), new.rule(s, 132)
    if (a[0], a[1]) != (b[0], b[1]):
        picked.append((s, a, b))
    if len(picked) >= WANT:
        break
print("seed", seed, "drawn", drawn, "changed", len(picked), flush=True)
t0, rows = time.time(), []
for s, a, b in picked:
    if time.time() - t0 > END:
        print("deadline"); break
    got = {}
    for tag, (name, params, why) in (("main", a), ("new", b)):
        f = f"{OUT}/j-{s.M}x{s.N}x{s.K}-{tag}.json"
        args = [a for k, v in params.items() for a in ("-p", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
        subprocess.run([sys.executable, "-m", "gemmlab", "run", "--variant", name, *args, "-M", str(s.M), "-N", str(s.N),
                        "-K", str(s.K), "--rounds", "3", "--out", f], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        try:
            d = json.load(open(f)); r = [x for x in d["rows"] if x["variant"] != "cuBLAS"][0]; c = [x for x in d["rows"] if x["variant"] == "cuBLAS"][0]
            got[tag] = {"params": params, "status": r["status"], "ms": r["ms"], "cublas_ms": c["ms"], "x": c["ms"] / r["ms"] if r["ms"] else None}
        except Exception as ex:
            got[tag] = {"params": params, "status": "ERROR", "error": str(ex)[:200]}
    rows.append({"shape": str(s), **got})
    m, n = got.get("main", {}), got.get("new", {})
    print(f"{str(s):18s} main {m.get('status')} x{m.get('x') or 0:.3f}  new {n.get('status')} x{n.get('x') or 0:.3f}  "
          f"{ {k: v for k, v in b[1].items() if a[1].get(k) != v} }", flush=True)
doc = {"candidate": sys.argv[1], "seed": seed, "drawn": drawn, "commit": os.environ.get("GEMMLAB_COMMIT"), "date": time.strftime("%FT%TZ", time.gmtime()), "rows": rows}
json.dump(doc, open(f"{OUT}/fp32-rule-judge.json", "w"), indent=1)
ok = [r for r in rows if r["main"].get("x") and r["new"].get("x")]
if ok:
    g = lambda k: math.exp(sum(math.log(r[k]["x"]) for r in ok) / len(ok))
    print(f"{len(ok)} shapes: main geomean {g('main'):.3f} min {min(r['main']['x'] for r in ok):.3f}; "
          f"new geomean {g('new'):.3f} min {min(r['new']['x'] for r in ok):.3f}; new/main {math.exp(sum(math.log(r['new']['x'] / r['main']['x']) for r in ok) / len(ok)):.3f}")
