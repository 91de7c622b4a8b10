"""1 x 3072 x 3072: where skinny_reduce's time goes, against skinny_narrow. CUDA events around each
launch, L2 flushed before each (the suite's timing) and, second column, not flushed (B read from L2).
For each skinny_reduce configuration, two edits of its kernel, timed only (their C is wrong):
"no meeting" skips the slices' meeting (each block stores its own sums, as skinny_narrow's blocks do),
"atomics and fence, no count" adds into the workspace and fences but never counts or reads back.
    python3 benchmarks/m1_meeting.py
Result on the H100: benchmarks/h100-m1-meeting.txt."""
import cupy as cp, numpy as np, gemmlab, dataclasses
from gemmlab.compile import load, compile_rendered
from gemmlab.render import render
from gemmlab.runner import bench
M, N, K = 1, 3072, 3072
A = cp.random.rand(M, K, dtype=cp.float32); B = cp.random.rand(K, N, dtype=cp.float32); C = cp.empty((M, N), cp.float32)
ws = cp.zeros(1 << 20, cp.uint8)
dims = (np.int32(M), np.int32(N), np.int32(K))
rows = []
def t(name, kern, g, args):
    if g.smem > 48 * 1024:
        kern.max_dynamic_shared_size_bytes = g.smem
    f = lambda: kern(g.grid, g.block, args, shared_mem=g.smem)
    rows.append((name, bench(f).median_ms, bench(f, flush=False).median_ms))
nv = gemmlab.catalog().get("skinny_narrow"); p = nv.defaults(); g = nv.geometry(p, M, N, K, 132)
t("narrow", load(gemmlab.build(nv, p)), g, (A, B, C) + dims)
rv = gemmlab.catalog().get("skinny_reduce")
for over in ({}, {"WAVES": 1}, {"WAVES": 4}, {"COLS": 128, "WARPS": 8, "WAVES": 1}):
    p = rv.resolve(over); g = rv.geometry(p, M, N, K, 132)
    t(f"reduce {over} grid {g.grid}", load(gemmlab.build(rv, p)), g, (A, B, C) + dims + (ws,))
    r = render(rv, p)
    for cut, label in (("if (gridDim.z > 1) {", "no meeting (each slice stores its own sums: wrong)"),
                       ("        __shared__ bool last;", "atomics and fence, no count")):
        src = r.source
        if label.startswith("no meeting"):
            src = src.replace(cut, "if (false) {")
        else:
            src = src.replace(cut, "        return;\n" + cut)
        k = load(compile_rendered(dataclasses.replace(r, source=src), "sm_90"))
        t(f"  {label}", k, g, (A, B, C) + dims + (ws,))
for name, ms, nf in rows:
    print(f"{name:70s} {ms * 1e3:7.2f} us  warm L2 {nf * 1e3:7.2f} us")
