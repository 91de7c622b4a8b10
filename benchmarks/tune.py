"""Time every valid configuration of a variant at one shape: how the templates' defaults were chosen.

    python benchmarks/tune.py regblock --size 4096 [--kernels-dir DIR] [--json FILE]
    python benchmarks/tune.py pipelined --vary STAGES=2,3,4 --vary BK=8,16 -p GROUP_M=1

With --vary, only the named parameters range over the given values (the others stay at their defaults
or at the value given with -p); without it, every valid configuration is timed. Each configuration is
checked against cupy.matmul before it is timed; the table is sorted by speed.
"""

import argparse
import itertools
import sys

from rich.console import Console

import gemmlab
from gemmlab import report
from gemmlab.runner import Problem, Shape


def configs(v, vary: list[str], fixed: list[str]) -> list[dict]:
    """The valid configurations to time (others are listed with the reason they are skipped)."""
    base = dict(item.split("=", 1) for item in fixed)
    if not vary:
        candidates = [dict(p, **base) for p, _ in v.configs()]
    else:
        axes = [(name, values.split(",")) for name, values in (item.split("=", 1) for item in vary)]
        candidates = [dict(base, **dict(zip([n for n, _ in axes], combo)))
                      for combo in itertools.product(*[vals for _, vals in axes])]
    out = []
    for c in candidates:
        try:
            params = v.resolve(c)
        except gemmlab.GemmlabError as e:
            print(f"skip {c}: {e.message.splitlines()[-1].strip()}")
            continue
        if params not in out:
            out.append(params)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--kernels-dir", action="append", default=[])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--vary", action="append", default=[], metavar="NAME=V1,V2", help="values to try")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=V", help="a fixed value")
    args = ap.parse_args()

    cat = gemmlab.catalog(tuple(args.kernels_dir))
    problem = Problem(Shape(args.size, args.size, args.size))
    dev = problem.device
    cublas = problem.cublas()
    rows = []
    for name in args.variants:
        v = cat.get(name)
        for params in configs(v, args.vary, args.param):
            compiled = gemmlab.build(v, params, dev.arch)
            r = problem.run(v, params, compiled)
            rows.append(report.row(r, dev.peak_fp32, cublas.valid_time))
            print(f"{name:12s} {report.params_text(params):32s} {r.status:5s} "
                  f"{(rows[-1]['tflops'] or 0):7.2f} TFLOP/s  regs {compiled.resources.registers} "
                  f"spills {compiled.resources.spills}", flush=True)
    rows.sort(key=lambda r: -(r["tflops"] or 0))
    rows.append(report.row(cublas, dev.peak_fp32, cublas.valid_time))
    doc = report.meta("tune " + " ".join(args.variants), dev, problem.shape, problem.seed)
    doc["rows"] = rows
    if args.json:
        with open(args.json, "w") as f:
            f.write(report.dump(doc))
    Console(width=160).print(report.results_table(rows, report.title_for(doc)))
    return 1 if report.failures(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
