"""Time every valid configuration of a variant at one shape: how the templates' defaults were chosen.

    python benchmarks/tune.py regblock --size 4096 [--kernels-dir DIR] [--json FILE]

Each configuration is checked against cupy.matmul before it is timed; the table is sorted by speed.
"""

import argparse
import sys

from rich.console import Console

import gemmlab
from gemmlab import report
from gemmlab.runner import Problem, Shape


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--kernels-dir", action="append", default=[])
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()

    cat = gemmlab.catalog(tuple(args.kernels_dir))
    problem = Problem(Shape(args.size, args.size, args.size))
    dev = problem.device
    cublas = problem.cublas()
    rows = []
    for name in args.variants:
        v = cat.get(name)
        for params, bad in v.configs():
            if bad:
                continue
            compiled = gemmlab.build(v, params, dev.arch)
            r = problem.run(v, params, compiled)
            rows.append(report.row(r, dev.peak_fp32, cublas.valid_time))
            print(f"{name:12s} {report.params_text(params):32s} {r.status:5s} "
                  f"{(rows[-1]['tflops'] or 0):7.2f} TFLOP/s  regs {compiled.resources.registers}", flush=True)
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
