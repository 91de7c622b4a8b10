"""1 x 3072 x 3072: skinny_narrow with an L2 prefetch-size hint on its 16-byte cp.async copies (.L2::128B or
.L2::256B: L2 fetches that much from DRAM around each miss), against no hint, at three band widths, and cuBLAS.
CUDA events, L2 flushed, median.
    python3 benchmarks/m1_prefetch.py
Result on the H100: benchmarks/h100-m1-prefetch.txt."""
import cupy as cp, numpy as np, gemmlab, dataclasses
from gemmlab.compile import load, compile_rendered
from gemmlab.render import render
from gemmlab.runner import bench
M, N, K = 1, 3072, 3072
A = cp.random.rand(M, K, dtype=cp.float32)
B = cp.random.rand(K, N, dtype=cp.float32)
C = cp.empty((M, N), cp.float32)
ref = A.astype(cp.float64) @ B.astype(cp.float64)
dims = (np.int32(M), np.int32(N), np.int32(K))
v = gemmlab.catalog().get("skinny_narrow")
rows = []
for over in ({}, {"COLS": 64}, {"COLS": 16}):
    p = v.resolve(over)
    g, r = v.geometry(p, M, N, K), render(v, p)
    for hint in ("", ".L2::128B", ".L2::256B"):
        src = r.source.replace("cp.async.cg.shared.global [%0]", f"cp.async.cg.shared.global{hint} [%0]")
        assert hint == "" or src != r.source
        k = load(compile_rendered(dataclasses.replace(r, source=src), "sm_90"))
        if g.smem > 48 * 1024:
            k.max_dynamic_shared_size_bytes = g.smem
        f = lambda: k(g.grid, g.block, (A, B, C) + dims, shared_mem=g.smem)
        C.fill(float("nan"))  # poison: an unwritten element fails the check
        f()
        err = float(cp.abs(C - ref).max() / cp.abs(ref).max())
        if not err < 1e-5:
            raise SystemExit(f"skinny_narrow {over} {hint}: wrong result (relative error {err:.1e}), not timed")
        rows.append((f"skinny_narrow {over} {hint or 'no hint'}", bench(f).median_ms, err))
rows.append(("cuBLAS", bench(lambda: cp.matmul(A, B, out=C)).median_ms, 0.0))
for name, ms, err in rows:
    print(f"{name:50s} {ms * 1e3:7.2f} us  err {err:.1e}")
