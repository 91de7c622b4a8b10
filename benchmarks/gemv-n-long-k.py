"""gemv_n against mma on small unaligned 16-bit C with a long K: the data behind GEMV_N_SMALL_MOST_WORK and
GEMV_N_SMALL_MOST_K in gemmlab/results/tuning.py (issue 45). Per shape, `gemmlab run` twice with 3 rounds taken
in turn with cuBLAS: gemv_n as the small-C rule takes it (ROWS=1, KSPLIT=8), then either mma at mma_rule's
choice (tuning: the shapes below, chosen by hand) or auto (judging: N shapes of the rule's region drawn with a
seed drawn at run time; K from LEAST_K up). Every kernel is checked element by element first.

    python3 benchmarks/gemv-n-long-k.py tune OUT.json
    python3 benchmarks/gemv-n-long-k.py judge OUT.json [N] [LEAST_K]
    python3 benchmarks/gemv-n-long-k.py merge OUT.json DIR   # the per-run files of DIR into one (no samples)
"""
import glob, json, math, os, random, secrets, subprocess, sys, tempfile

TUNE = [(68, 48, 14725), (40, 27, 6001), (100, 30, 4001), (20, 45, 9001), (120, 20, 2001), (60, 33, 20001),
        (150, 30, 1500), (10, 17, 30001), (60, 20, 3001), (33, 41, 2047)]


def draw(n: int, least_k: int, seed: int) -> list[tuple[int, int, int]]:
    """Shapes of the small-C rule's region: up to 256 rows, N of 9-48 not a multiple of 8, at most 5 blocks an SM."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        M = int(math.exp(rng.uniform(0, math.log(256))))
        N = rng.choice([c for c in range(9, 49) if c % 8])
        K = int(math.exp(rng.uniform(math.log(least_k), math.log(32768))))
        if M * math.ceil(N / 8) <= 5 * 132:
            out.append((M, N, K))
    return out


def measure(shapes, second, where: str) -> None:
    from gemmlab.results.model import Shape
    from gemmlab.results.tuning import mma_rule
    for M, N, K in shapes:
        runs = {"gemv_n": ["--variant", "gemv_n", "-p", "ROWS=1", "-p", "KSPLIT=8"]}
        if second == "mma":
            name, params, _ = mma_rule(Shape(M, N, K), 132, True)
            runs["mma"] = ["--variant", name] + [a for k, v in params.items() for a in ("-p", f"{k}={v}")]
        else:
            runs["auto"] = ["--variant", "auto"]
        for kind, args in runs.items():
            subprocess.run([sys.executable, "-m", "gemmlab", "run", *args, "--dtype", "bf16", "-M", str(M), "-N", str(N),
                            "-K", str(K), "--rounds", "3", "--out", f"{where}/{M}x{N}x{K}-{kind}.json"],
                           stdout=subprocess.DEVNULL, timeout=120)


def merge(where: str, about: dict) -> dict:
    doc, rows = None, []
    for f in sorted(glob.glob(f"{where}/*x*x*-*.json")):
        shape, kind = os.path.basename(f)[:-5].rsplit("-", 1)
        d = json.load(open(f))
        doc = doc or {k: d.get(k) for k in ("date", "commit", "device", "cupy", "nvrtc")}
        for r in d["rows"]:
            r = {k: v for k, v in r.items() if k not in ("samples_ms", "source")}
            rows.append(dict(r, shape=shape, run=kind))
    return dict(doc or {}, **about, rows=rows)


def table(doc: dict) -> None:
    by = {}
    for r in doc["rows"]:
        by.setdefault(r["shape"], {})["cuBLAS" if r["variant"] == "cuBLAS" else f"{r['run']}={r['variant']}"] = r
    for shape, d in by.items():
        M, N, K = map(int, shape.split("x"))
        c = d["cuBLAS"]["ms"]
        print(f"{shape:16s} blocks x K {M * math.ceil(N / 8) * K:9d}  " + "  ".join(
            f"{k} {r['status']} {r['ms'] * 1e3:.1f} us x{c / r['ms']:.2f}" for k, r in d.items() if r["ms"]))


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "merge":
        doc = merge(sys.argv[3], json.load(open(f"{sys.argv[3]}/about.json")) if os.path.exists(f"{sys.argv[3]}/about.json") else {})
    else:
        with tempfile.TemporaryDirectory() as where:
            if mode == "tune":
                about = {"mode": "tune", "shapes": TUNE}
                measure(TUNE, "mma", where)
            else:
                n, least_k, seed = int(sys.argv[3]) if len(sys.argv) > 3 else 14, int(sys.argv[4]) if len(sys.argv) > 4 else 512, secrets.randbelow(2**31)
                about = {"mode": "judge", "seed": seed, "least_k": least_k, "shapes": draw(n, least_k, seed)}
                measure(about["shapes"], "auto", where)
            doc = merge(where, about)
    with open(out, "x") as f:
        json.dump(doc, f, indent=1)
    table(doc)
