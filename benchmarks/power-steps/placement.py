"""Where the hardware puts the blocks of a persistent grid: %smid of each block, for 1-block and 2-block clusters,
with a grid of 132 (ours: 1D) and of (2, 66) (cuBLAS's nvjet kernel). Each block takes ~200 KB of shared memory,
so one fits per SM, as in wgmma_ws, and spins ~20 us so that all are resident together. Then 2-block clusters
launched with each cluster scheduling policy (cuLaunchKernelEx's CLUSTER_SCHEDULING_POLICY_PREFERENCE).
Usage: python3 benchmarks/power-steps/placement.py"""
import collections
import ctypes
import cupy as cp
from cuda.bindings import driver as drv

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


def report(what, rows, cm, dims=(2, 1)):
    sm = rows[0]
    same = all(r == sm for r in rows)
    print(f"{what}: smid by block (same in 3 launches: {same}); {len(set(sm))} distinct, max {max(sm)}")
    print("  ", " ".join(map(str, sm)))
    if cm == 2:
        # partners: blocks b and b + 1 for clusters along x, b and b + gridDim.x (= 2) along y
        mates = [(b, b + 1) for b in range(0, 132, 2)] if dims == (2, 1) else [(b, b + 2) for b in range(132) if b // 2 % 2 == 0]
        pairs = collections.Counter((sm[a] // 2 == sm[b] // 2, abs(sm[a] - sm[b])) for a, b in mates)
        print("   cluster partners: (same smid//2, |difference|) ->", dict(pairs))
        if dims == (1, 2):  # and blocks (0, y), (1, y), of two different clusters
            xs = collections.Counter((sm[b] // 2 == sm[b + 1] // 2, abs(sm[b] - sm[b + 1])) for b in range(0, 132, 2))
            print("   blocks (0, y) and (1, y): (same smid//2, |difference|) ->", dict(xs))


for cm, grid, dims in ((1, (132, 1), None), (2, (132, 1), (2, 1)), (2, (2, 66), (2, 1)), (2, (2, 66), (1, 2))):
    src = SRC.replace("{{CD}}", "__cluster_dims__(%d, %d, 1)" % dims if dims else "").replace("CLUSTER", str(int(cm == 2)))
    k = cp.RawKernel(src, "probe", options=("--gpu-architecture=sm_90a",))
    k.max_dynamic_shared_size_bytes = 200 * 1024
    rows = []
    for rep in range(3):
        out = cp.full(2 * 132, -1, dtype=cp.int32)
        k(grid, (384,), (out,), shared_mem=200 * 1024)
        o = out.get().reshape(-1, 2)
        rows.append([int(s) for s in o[:, 0]])
    report(f"cluster {dims or 1}, grid {grid}", rows, cm, dims)


k = cp.RawKernel(SRC.replace("{{CD}}", "").replace("CLUSTER", "1"), "probe", options=("--gpu-architecture=sm_90a",))
k.max_dynamic_shared_size_bytes = 200 * 1024  # one kernel for every policy: the clusters are the launch's
for policy in ("DEFAULT", "SPREAD", "LOAD_BALANCING"):
    dim = drv.CUlaunchAttribute()
    dim.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dim.value.clusterDim.x, dim.value.clusterDim.y, dim.value.clusterDim.z = 2, 1, 1
    pol = drv.CUlaunchAttribute()
    pol.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
    pol.value.clusterSchedulingPolicyPreference = getattr(drv.CUclusterSchedulingPolicy, "CU_CLUSTER_SCHEDULING_POLICY_" + policy)
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 132, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 384, 1, 1
    cfg.sharedMemBytes, cfg.numAttrs, cfg.attrs = 200 * 1024, 2, [dim, pol]
    rows = []
    for rep in range(3):
        out = cp.full(2 * 132, -1, dtype=cp.int32)
        err, = drv.cuLaunchKernelEx(cfg, drv.CUfunction(k.kernel.ptr), ((out.data.ptr,), (ctypes.c_void_p,)), 0)
        assert err == drv.CUresult.CUDA_SUCCESS, err
        rows.append([int(x) for x in out.get().reshape(-1, 2)[:, 0]])
    report(f"cluster 2 at launch, policy {policy}", rows, 2)
