"""Which SMs share a GPC, and a persistent grid's order that makes use of it.

Between the SMs and the L2 sits a request coalescer that serves loads of the same lines by SMs of one GPC
(graphics processing cluster, 16-18 SMs on the H100) once, even thousands of cycles apart, and almost
never merges loads of SMs in different GPCs. SM numbers go round the GPCs (on an H100: SMs 0-1 in one
GPC, 2-3 in the next, ...), so a persistent grid's neighbouring blocks, which share the most, sit in
different GPCs. `slot_table` gives each cluster a slot of the grid by the GPC it runs in, so that the
clusters of one GPC work on the same rows of A: the wgmma_ws template reads its slot through %smid
(docs/journal.md, "The GPC order").

CUDA has no call that names an SM's GPC. A cluster's blocks always run in one GPC, so `gpc_map`
launches large clusters, one block per SM, and joins the SMs that each cluster's blocks ran on.

`slot_table` is plain Python, tested on a CPU; `gpc_map` and `order_argument` need the GPU.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import GemmlabError
from ..limits import GPC_SLOTS as MAX_SLOTS  # the slots of a GpcOrder argument (a render global too)

PROBE = r"""
extern "C" __global__ void __launch_bounds__(32, 1) where(int* out)
{
    extern __shared__ int pad[];  // the launch asks for most of an SM's shared memory: one block per SM
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    const long long t0 = clock64();
    while (clock64() - t0 < 20000) {}  // long enough that all the launch's clusters are resident together
    if (threadIdx.x == 0)
        out[blockIdx.x] = smid, pad[0] = smid;
}
"""

_maps: dict[int, list[list[int]]] = {}


def join(clusters: list[list[int]], sms: int) -> list[list[int]]:
    """GPCs from the SM sets of clusters (each set inside one GPC): the union of sets that overlap.
    SMs that no cluster of 3 or more reached (on the H100, 8 SMs that take only 2-block clusters) are
    put together in one last group."""
    parent = list(range(sms))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    reached = set()
    for group in clusters:
        if len(group) >= 3:
            reached.update(group)
            for s in group[1:]:
                parent[find(s)] = find(group[0])
    groups: dict[int, list[int]] = {}
    for s in range(sms):
        groups.setdefault(find(s) if s in reached else -1, []).append(s)
    return sorted(groups.values(), key=lambda g: (g[0] not in reached, g[0]))


def gpc_map(sms: int, sizes=(16, 12, 8, 4), reps: int = 2) -> list[list[int]]:
    """The GPU's SMs grouped by GPC (sorted lists of SM numbers), from launches of clusters of `sizes`
    blocks (16 is a non-portable size, which the H100 allows), as many at once as fit."""
    from .driver import bindings, cuda
    cupy, drv = cuda(), bindings()
    index = cupy.cuda.runtime.getDevice()
    if index in _maps:
        return _maps[index]
    kernel = cupy.RawKernel(PROBE, "where")
    smem = cupy.cuda.runtime.getDeviceProperties(index)["sharedMemPerBlockOptin"] - 1024
    kernel.max_dynamic_shared_size_bytes = smem
    func = drv.CUfunction(kernel.kernel.ptr)
    drv.cuFuncSetAttribute(func, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    clusters = []
    for size in sizes:
        dim = drv.CUlaunchAttribute()
        dim.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        dim.value.clusterDim.x, dim.value.clusterDim.y, dim.value.clusterDim.z = size, 1, 1
        config = drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = size, 1, 1
        config.blockDimX, config.blockDimY, config.blockDimZ = 32, 1, 1
        config.sharedMemBytes, config.numAttrs, config.attrs = smem, 1, [dim]
        err, fit = drv.cuOccupancyMaxActiveClusters(func, config)
        if err != drv.CUresult.CUDA_SUCCESS or fit == 0:
            continue  # a cluster size this GPU does not take
        config.gridDimX = size * fit
        for _ in range(reps):
            out = cupy.full(size * fit, -1, dtype=cupy.int32)
            err, = drv.cuLaunchKernelEx(config, func, ((out.data.ptr,), (ctypes.c_void_p,)), 0)
            if err != drv.CUresult.CUDA_SUCCESS:
                raise GemmlabError(f"the GPC probe's launch of {size}-block clusters failed: {err.name}")
            placed = out.get().tolist()
            clusters += [placed[c * size:(c + 1) * size] for c in range(fit)]
    _maps[index] = join(clusters, sms)
    return _maps[index]


def slot_table(gpcs: list[list[int]], sms: int, cluster: int, group: int) -> list[int]:
    """The slot of the persistent grid (0 .. sms/cluster - 1) for the cluster whose first block runs on
    SM s, at index s // cluster, for a grid of one block per SM in clusters of `cluster` blocks whose
    blocks share an SM pair (cluster 2) or are single (cluster 1).

    In the GROUP_M order of tile_origin (kernels/hopper.j2), slots v and v + group * k take tiles in the
    same row of tiles, and stay so from wave to wave (each adds the grid's size). So the slots are dealt
    out in `group` classes by v % group, and each GPC takes a class, the largest GPCs first: its clusters
    then load the same rows of A, which the coalescer serves once. A GPC larger than what is left of a
    class goes on in the next fullest one."""
    units = sms // cluster
    if units > MAX_SLOTS:
        raise GemmlabError(f"a GPC order holds at most {MAX_SLOTS} slots; this GPU has {units}")
    by_gpc: dict[int, list[int]] = {}
    for g, members in enumerate(gpcs):
        for s in members:
            if s % cluster == 0 and s // cluster < units:
                by_gpc.setdefault(g, []).append(s // cluster)
    classes = {r: list(range(r, units, group)) for r in range(min(group, units))}
    table = [-1] * units
    for g in sorted(by_gpc, key=lambda g: (-len(by_gpc[g]), g)):
        r = max(classes, key=lambda r: (len(classes[r]), -r))
        for u in by_gpc[g]:
            if not classes[r]:
                r = max(classes, key=lambda r: (len(classes[r]), -r))
            table[u] = classes[r].pop(0)
    left = sorted(v for c in classes.values() for v in c)  # units no GPC named (a partial map): any order
    for u in range(units):
        if table[u] < 0:
            table[u] = left.pop(0)
    return table


def order_argument(table: list[int] | None) -> np.void:
    """The kernel's `const __grid_constant__ GpcOrder` argument: the number of slots, then each SM pair's
    (or SM's) slot; no table (0 slots) tells the kernel to take the natural order, blockIdx.x."""
    size = 4 + MAX_SLOTS  # struct GpcOrder { unsigned n; unsigned char slot[MAX_SLOTS]; }
    raw = np.zeros(size, dtype=np.uint8)
    if table:
        raw[:4] = np.frombuffer(np.uint32(len(table)).tobytes(), dtype=np.uint8)
        raw[4:4 + len(table)] = table
    return raw.view(np.dtype((np.void, size)))[0]
