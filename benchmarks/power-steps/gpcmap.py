"""Which SMs share a GPC (run 55). A cluster's blocks always sit in one GPC, so blocks of large clusters
(up to 16, non-portable sizes allowed), each alone on its SM (200 KB of shared memory), name SMs of one GPC; the
union of many launches of several cluster sizes gives the GPCs. Then where wgmma_ws's persistent grid of 66
2-block clusters sits, by GPC, and which tiles its clusters start on (4096^3, 256 x 256 cluster tiles, GROUP_M 8).
gpc_map() is imported by merge.py.
Usage: python3 benchmarks/power-steps/gpcmap.py"""
import collections
import ctypes
import cupy as cp
from cuda.bindings import driver as drv

SRC = r"""
extern "C" __global__ void __launch_bounds__(128, 1) where(int* out)
{
    extern __shared__ int pad[];
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    long long t0 = clock64();
    while (clock64() - t0 < 40000) {}
    if (threadIdx.x == 0)
        out[blockIdx.x] = smid, pad[0] = smid;
}
"""
SMEM = 200 * 1024


def _check(res):
    err = res[0] if isinstance(res, tuple) else res
    assert err == drv.CUresult.CUDA_SUCCESS, err
    return res[1] if isinstance(res, tuple) and len(res) > 1 else None


def _config(size, clusters):
    dim = drv.CUlaunchAttribute()
    dim.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dim.value.clusterDim.x, dim.value.clusterDim.y, dim.value.clusterDim.z = size, 1, 1
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = size * clusters, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 128, 1, 1
    cfg.sharedMemBytes, cfg.numAttrs, cfg.attrs = SMEM, 1, [dim]
    return cfg


def placements(size, clusters=None, reps=3):
    """smid of every block of `clusters` clusters of `size` blocks (default: as many as fit at once), per launch."""
    k = cp.RawKernel(SRC, "where", options=("--gpu-architecture=sm_90a",))
    k.max_dynamic_shared_size_bytes = SMEM
    fn = drv.CUfunction(k.kernel.ptr)
    _check(drv.cuFuncSetAttribute(fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))
    if clusters is None:
        clusters = _check(drv.cuOccupancyMaxActiveClusters(fn, _config(size, 1)))
    out = []
    for _ in range(reps):
        buf = cp.full(size * clusters, -1, dtype=cp.int32)
        _check(drv.cuLaunchKernelEx(_config(size, clusters), fn, ((buf.data.ptr,), (ctypes.c_void_p,)), 0))
        out.append([int(s) for s in buf.get()])
    return clusters, out


def gpc_map(sizes=(16, 14, 12, 10, 9, 8, 6, 4)):
    """The GPCs as sorted lists of smids (union of the SM sets of co-scheduled clusters)."""
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for size in sizes:
        n, runs = placements(size)
        for sm in runs:
            for c in range(n):
                group = sm[c * size:(c + 1) * size]
                for s in group[1:]:
                    parent[find(s)] = find(group[0])
    # SMs that no large cluster reached stay alone; 2-block clusters place every SM pair
    _, runs = placements(2, 66, reps=1)
    for s in runs[0]:
        find(s)
    groups = collections.defaultdict(list)
    for s in list(parent):
        groups[find(s)].append(s)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


if __name__ == "__main__":
    for size in (16, 8):
        n, runs = placements(size)
        print(f"clusters of {size}: {n} at once; first launch, smids by cluster:")
        for c in range(n):
            print("  ", runs[0][c * size:(c + 1) * size])
    gpcs = gpc_map()
    gpc_of = {s: g for g, sms in enumerate(gpcs) for s in sms}
    print(f"GPCs: {len(gpcs)}, sizes {[len(g) for g in gpcs]}")
    for g, sms in enumerate(gpcs):
        print(f"  GPC {g}: {sms}")
    # wgmma_ws at 4096^3: cluster c starts on tile c; 16 x 16 tiles of 256 x 256, GROUP_M 8 rows at a time
    _, runs = placements(2, 66)
    sm = runs[0]
    print("2-block clusters, grid 132: cluster -> (smids, GPC), same in 3 launches:", all(r == sm for r in runs))
    by_gpc = collections.defaultdict(list)
    for c in range(66):
        by_gpc[gpc_of[sm[2 * c]]].append(c)  # by rank 0's SM (SMs that no large cluster reached are groups of one)
    for g in sorted(by_gpc):
        starts = [(c % 8, c // 8) for c in by_gpc[g]]  # (tile row, tile column) of the cluster's first tile
        rows, cols = collections.Counter(r for r, _ in starts), collections.Counter(c for _, c in starts)
        print(f"  GPC {g}: clusters {by_gpc[g]}; first tiles' rows {dict(rows)}, columns {dict(cols)}")
