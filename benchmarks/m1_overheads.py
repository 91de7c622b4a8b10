"""1 x 3072 x 3072: where do skinny_async's 24.4 us go? Times (CUDA events, L2 flushed, median) of zeroing C
alone, the kernel alone, both (what the suite times), both with a warm L2; cuBLAS; an empty kernel.
    python3 benchmarks/m1_overheads.py                 # the table
    ncu --csv --metrics gpu__time_duration.sum python3 benchmarks/m1_overheads.py --once
                                                       # each kernel's own duration: 2 launches a config, then cuBLAS
Result on the H100: benchmarks/h100-m1-overheads.txt. Written for skinny_async as it was then; since commit
12ca5f3 the kernel zeroes C itself (kernels/split.j2), so the fill here is no longer needed by it."""
import sys

import cupy as cp
import numpy as np

import gemmlab
from gemmlab.compile import load
from gemmlab.runner import bench

once = "--once" in sys.argv
v = gemmlab.catalog().get("skinny_async")
M, N, K = 1, 3072, 3072
A = cp.random.rand(M, K, dtype=cp.float32)
B = cp.random.rand(K, N, dtype=cp.float32)
C = cp.empty((M, N), cp.float32)
ref = A.astype(cp.float64) @ B.astype(cp.float64)
configs = [dict(BM=1, WARPS=4, ROWS=16, STAGES=2, SPLIT_K=64), dict(BM=1, WARPS=2, ROWS=8, STAGES=3, SPLIT_K=32),
           dict(BM=1, WARPS=8, ROWS=8, STAGES=4, SPLIT_K=8), dict(BM=1, WARPS=8, ROWS=16, STAGES=3, SPLIT_K=4)]
rows = []
for params in configs:
    p = v.resolve(params)
    kernel, geo = load(gemmlab.build(v, p)), v.geometry(p, M, N, K, 132)
    if geo.smem > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = geo.smem
    args = (A, B, C, np.int32(M), np.int32(N), np.int32(K))

    def kern():
        kernel(geo.grid, geo.block, args, shared_mem=geo.smem)

    def both():  # what the suite times: split K adds into C, so C is zeroed first
        C.fill(0)
        kern()

    both()
    err = float(cp.abs(C - ref).max() / cp.abs(ref).max())
    if once:
        both()
        cp.cuda.Device().synchronize()
        continue
    rows.append((str(params), bench(lambda: C.fill(0)).median_ms, bench(kern).median_ms, bench(both).median_ms,
                 bench(both, flush=False).median_ms, err))


def mm():
    cp.matmul(A, B, out=C)


if once:
    mm()
    cp.cuda.Device().synchronize()
    sys.exit()
rows.append(("cuBLAS", 0, bench(mm).median_ms, bench(mm).median_ms, bench(mm, flush=False).median_ms, 0))
empty = cp.RawKernel('extern "C" __global__ void e() {}', "e")
rows.append(("empty kernel", 0, bench(lambda: empty((1,), (32,), ())).median_ms, 0, 0, 0))
print(f"{'config':60s} {'fill':>7s} {'kernel':>7s} {'both':>7s} {'warmL2':>7s} err")
for r in rows:
    print(f"{r[0]:60s} {r[1]*1e3:7.1f} {r[2]*1e3:7.1f} {r[3]*1e3:7.1f} {r[4]*1e3:7.1f} {r[5]:.1e}")
