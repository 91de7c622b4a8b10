"""The element-wise check on the GPU: regenerates the numbers of docs/checking.md.

1. Every built-in rung at its defaults, in each input type it runs, on an odd shape, 4096^3 and 8192^3:
   its verdict, and how near its worst element came to its bound (err/bound on the timed inputs).
2. The planted bugs of tests/planted.py at 4096^3 and 8192^3, in each type they run: each must FAIL,
   untimed, with the place of the error.
3. The check's cost at 8192^3: making the timed inputs (reference and bound included), and verifying
   one launch on all three input sets, against the kernel's own time.

Usage: PYTHONPATH=.:tests python3 benchmarks/verdicts.py OUT.json   (prints a table last)
"""

import json
import sys
import time

import gemmlab
from gemmlab.results.records import git_commit
from gemmlab.gpu.problem import Problem, c_tile
from gemmlab.results.model import Shape
from planted import PLANTS, write

ODD = [(1000, 999, 1001), (1000, 1000, 520)]  # the second where TMA needs N and K multiples of 8
BIG = [(4096, 4096, 4096), (8192, 8192, 8192)]
# Plants that go wrong only at an odd M or K (the last row of tiles, the K tail) also run just past the
# big squares.
ODD_BIG = [(4097, 4096, 4100), (8193, 8192, 8196)]


def runnable(v, params, shape):
    try:
        v.geometry(params, *shape)
        return True
    except gemmlab.GemmlabError:
        return False


def add_rung(doc, name, dtype, shape, r):
    doc["rungs"].append({"variant": name, "dtype": dtype, "shape": list(shape), "status": r.status,
                         "err_bound": r.check.ratio if r.check else None,
                         "rel_err": r.check.rel_err if r.check else None,
                         "why": r.check.summary() if r.check and not r.check.passed else r.error})
    print(doc["rungs"][-1], flush=True)


def main(out_path):
    dev = gemmlab.get_device()
    doc = {"device": dev.name, "date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
           "rungs": [], "planted": [], "cost": []}
    problems = {}

    def problem(shape, dtype):
        if (shape, dtype) not in problems:
            problems.clear()  # one at a time: 8192^3 sets are large
            problems[(shape, dtype)] = Problem(Shape(*shape), seed=1234, dtype=dtype)
        return problems[(shape, dtype)]

    cat = gemmlab.catalog()
    jobs = [(v, d) for v in cat.ladder() for d in v.dtypes]
    for shape in [None] + BIG:  # one Problem per (shape, dtype): rungs of a dtype in a row
        for dtype in ("fp32", "tf32", "fp16", "bf16"):
            for v, d in jobs:
                if d != dtype:
                    continue
                params = v.resolve(v.for_dtype(d))
                s = shape or next((x for x in ODD if runnable(v, params, x)), None)
                if s is None or not runnable(v, params, s):
                    continue
                r = problem(s, d).run(gemmlab.build(v, params), timed=False)
                add_rung(doc, v.name, d, s, r)
            if shape:  # cuBLAS on the same inputs: the yardstick is checked as the kernels are
                add_rung(doc, "cuBLAS", dtype, shape, problem(shape, dtype).cublas(min_reps=1))

    d = __import__("pathlib").Path("/tmp/planted")
    write(d)
    planted = gemmlab.catalog((d,))
    for shape in BIG + ODD_BIG:
        for plant in PLANTS:
            if shape in ODD_BIG and not plant.odd_only:
                continue
            for dtype in plant.dtypes:
                v = planted.get(plant.name)
                params = v.resolve(v.for_dtype(dtype))
                r = problem(shape, dtype).run(gemmlab.build(v, params))
                c = r.check
                doc["planted"].append({"plant": plant.name, "what": plant.what, "dtype": dtype, "shape": list(shape),
                                       "status": r.status, "timed": r.timing is not None,
                                       "bad": c.bad if c else None, "rel_err": c.rel_err if c else None,
                                       "tiles": [c.tiles["bad"], c.tiles["total"]] if c and c.tiles else None,
                                       "where": c.summary() if c else r.error})
                print(doc["planted"][-1], flush=True)

    for name, dtype in (("spread", "fp32"), ("wgmma_ws", "bf16")):
        problems.clear()
        shape = Shape(8192, 8192, 8192)
        t0 = time.perf_counter()
        p = Problem(shape, seed=99, dtype=dtype)
        made_s = time.perf_counter() - t0
        v = cat.get(name)
        params = v.resolve(v.for_dtype(dtype))
        compiled = gemmlab.build(v, params)
        r = p.run(compiled, min_reps=10)  # warms everything up; its time is the kernel's
        t0 = time.perf_counter()
        again = p.run(compiled, timed=False)  # the check alone: three input sets
        check_s = time.perf_counter() - t0
        doc["cost"].append({"variant": name, "dtype": dtype, "shape": [8192] * 3, "inputs_s": made_s,
                            "check_s": check_s, "kernel_ms": r.timing.median_ms if r.timing else None,
                            "status": again.status, "tile": list(c_tile(params))})
        print(doc["cost"][-1], flush=True)

    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)

    print(f"\n{dev.name} {doc['date']} commit {doc['commit']}")
    worst = {}
    for r in doc["rungs"]:
        key = r["dtype"]
        if r["err_bound"] is not None:
            worst[key] = max(worst.get(key, 0), r["err_bound"])
    bad = [r for r in doc["rungs"] if r["status"] != "PASS"]
    print(f"built-in rungs: {len(doc['rungs'])} checks, {len(bad)} not PASS; worst err/bound by dtype:",
          {k: round(x, 3) for k, x in worst.items()})
    for r in bad:
        print("  NOT PASS:", r)
    odd = {p.name for p in PLANTS if p.odd_only}
    missed = [p for p in doc["planted"] if (p["status"] != "FAIL" or p["timed"])
              and not (p["plant"] in odd and tuple(p["shape"]) in BIG)]
    print(f"planted: {len(doc['planted'])} runs, {len(missed)} not caught (the odd-only plants are right, "
          f"as they should be, on the squares)")
    for p in doc["planted"]:
        print(f"  {p['plant']:30} {p['dtype']:5} {'x'.join(map(str, p['shape'])):15} {p['status']:5} "
              f"bad={p['bad']} tiles={p['tiles']}")
    for c in doc["cost"]:
        print(f"cost at 8192^3 {c['variant']} {c['dtype']} ({c['status']}): inputs {c['inputs_s']:.2f} s, "
              f"check of 3 sets {c['check_s']:.2f} s, kernel {c['kernel_ms']} ms")


if __name__ == "__main__":
    main(sys.argv[1])
