"""The Python API, one stage at a time: find a template, render it, compile it, run, check, time.
(The commands in one call each, gemmlab.run, compare, sweep, ...: docs/api.md.)

    python examples/api_tour.py [--variant tiled] [-p TILE=16] [--size 2048]
    python examples/api_tour.py --variant wgmma_ws -p DTYPE=fp16      # a tensor-core rung

Render and compile need no GPU (without one it compiles for sm_90 and stops there); run needs one.
"""

import argparse
import sys

import gemmlab
from gemmlab.api import default_arch
from gemmlab.gpu.problem import Problem
from gemmlab.results.model import Shape

ap = argparse.ArgumentParser()
ap.add_argument("--variant", default="tiled")
ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
ap.add_argument("--size", type=int, default=2048)
args = ap.parse_args()

# 1. Find the template and validate the parameters against its header's choices and constraints.
cat = gemmlab.catalog()
variant = cat.get(args.variant)
params = variant.resolve(dict(p.split("=", 1) for p in args.param))
print(f"{variant.name}: {variant.idea}\n  params {params}, launch block {variant.block}, grid {variant.grid}")

# 2. Render: parameters -> CUDA source (and a map back to template lines).
rendered = gemmlab.render(variant, params)
print(f"  rendered {len(rendered.source.splitlines())} lines of CUDA")

# 3. Compile with NVRTC to a cubin (cached on disk) for the GPU's architecture, or sm_90 without a GPU.
arch, no_gpu = default_arch()
compiled = gemmlab.compile_rendered(rendered, arch)
kernel = gemmlab.Kernel(compiled)  # what runs: gemmlab.build(variant, params) does steps 2 and 3 in one
r = compiled.resources
print(f"  {compiled.arch}: {r.registers} registers, {r.smem} B shared, {r.spills} B spilled, "
      + ("from the cache" if compiled.cached else f"compiled in {compiled.compile_ms:.0f} ms"))
if no_gpu:
    print(f"  no GPU here, so it was compiled for {arch}; running it needs an NVIDIA GPU: the tour stops here")
    sys.exit(0)

# 4. Run on fresh random inputs of the variant's input type (DTYPE, or fp32), check them against
#    cupy.matmul, and time it (only if it is right).
device = gemmlab.get_device()
dtype = variant.dtype(params)
problem = Problem(Shape(args.size, args.size, args.size), dtype=dtype)
result = problem.run(kernel)
cublas = problem.cublas()
c = result.check
print(f"  check: {result.status} ({c.summary()}; relative error {c.rel_err:.1e} against {c.reference})")
if result.valid_time:
    tflops = problem.shape.flops / (result.valid_time * 1e-3) / 1e12
    print(f"  {result.valid_time:.3f} ms median of {result.timing.reps}: {tflops:.2f} TFLOP/s, "
          f"{100 * tflops * 1e12 / device.peak(dtype):.1f}% of the {dtype.upper()} peak, "
          f"{100 * cublas.valid_time / result.valid_time:.1f}% of cuBLAS")
