"""Where the hardware puts the blocks of a persistent grid: %smid of each block, for 1-block and 2-block clusters,
with a grid of 132 (ours: 1D) and of (2, 66) (cuBLAS's nvjet kernel). Each block takes ~200 KB of shared memory,
so one fits per SM, as in wgmma_ws, and spins ~20 us so that all are resident together.
Usage: python3 benchmarks/power-steps/placement.py"""
import collections
import cupy as cp

SRC = r"""
extern "C" __global__ void __launch_bounds__(384, 1) {{CD}}
probe(int* out)
{
    extern __shared__ int pad[];
    unsigned smid, rank = 0;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
#if CLUSTER
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
    long long t0 = clock64();
    while (clock64() - t0 < 40000) {}
    if (threadIdx.x == 0) {
        const int b = blockIdx.x + blockIdx.y * gridDim.x;
        out[2 * b] = smid, out[2 * b + 1] = rank;
        pad[0] = b;
    }
}
"""
for cm, grid in ((1, (132, 1)), (2, (132, 1)), (2, (2, 66))):
    src = SRC.replace("{{CD}}", "__cluster_dims__(2, 1, 1)" if cm == 2 else "").replace("CLUSTER", str(int(cm == 2)))
    k = cp.RawKernel(src, "probe", options=("--gpu-architecture=sm_90a",))
    k.max_dynamic_shared_size_bytes = 200 * 1024
    rows = []
    for rep in range(3):
        out = cp.full(2 * 132, -1, dtype=cp.int32)
        k(grid, (384,), (out,), shared_mem=200 * 1024)
        o = out.get().reshape(-1, 2)
        rows.append([int(s) for s in o[:, 0]])
    sm = rows[0]
    same = all(r == sm for r in rows)
    print(f"cluster {cm}, grid {grid}: smid by block (same in 3 launches: {same}); {len(set(sm))} distinct, max {max(sm)}")
    print("  ", " ".join(map(str, sm)))
    if cm == 2:
        pairs = collections.Counter((sm[2 * c] // 2 == sm[2 * c + 1] // 2, abs(sm[2 * c] - sm[2 * c + 1])) for c in range(66))
        print("   cluster partners: (same smid//2, |difference|) ->", dict(pairs))
