"""skinny_narrow (1 row) and skinny_async (16 rows) without and with EVICT_FIRST, and cuBLAS: each checked, then
launched twice after the runner's flush (a 256 MB memset, which leaves the L2 full of dirty lines), for ncu:
    M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
    ncu --cache-control none -k regex:"gemm|gemv" --metrics $M python3 benchmarks/m1-evict/ncu_m1.py
Result on the H100: benchmarks/h100-m1-evict.txt."""
import cupy as cp, gemmlab, gemmlab.runner as R
from gemmlab.runner import Problem, Shape, FLUSH_BYTES
buf = cp.empty(FLUSH_BYTES, dtype=cp.uint8)
def two_flushed(fn, **kw):  # in place of the timing, which the runner does between its two checks
    for _ in range(2):
        buf.fill(0)
        fn()
    return R.Timing(0.0, 0.0, 0.0, 2)
R.bench = two_flushed
for M, name, base in [(1, "skinny_narrow", {}), (16, "skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 32, "STAGES": 2, "WARPS": 2})]:
    p = Problem(Shape(M, 3072, 3072), dtype="fp32")
    for ev in (False, True):
        v = gemmlab.catalog().get(name)
        params = v.resolve(dict(base, EVICT_FIRST=ev))
        r = p.run(v, params, gemmlab.build(v, params))
        print(M, name, "EVICT_FIRST", ev, r.status, flush=True)
    print(M, "cuBLAS", p.cublas().status, flush=True)
cp.cuda.Device().synchronize()
