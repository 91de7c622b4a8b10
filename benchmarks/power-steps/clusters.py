"""How many clusters of 2 and of 4 wgmma_ws blocks can be resident at once (cuOccupancyMaxActiveClusters): a
persistent grid with stream-K needs all of its blocks resident. Run 12 ran it with 4 added to wgmma_ws's
CLUSTER_M choices (taken out again after it); tests/test_tensor.py checks the default's clusters on the GPU.
Usage: python3 benchmarks/power-steps/clusters.py"""
import gemmlab
from cuda.bindings import driver as drv
from gemmlab.compile import load
v = gemmlab.catalog().get("wgmma_ws")
for cm in (2, 4):
    p = v.resolve(v.for_dtype("bf16", {"CLUSTER_M": cm, "STREAM_K": False}))
    k = load(gemmlab.build(v, p))
    geo = v.geometry(p, 4096, 4096, 4096, 132)
    k.max_dynamic_shared_size_bytes = geo.smem
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cm, 1, 1
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = geo.grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = geo.block
    cfg.sharedMemBytes = geo.smem
    cfg.numAttrs, cfg.attrs = 1, [attr]
    err, n = drv.cuOccupancyMaxActiveClusters(drv.CUfunction(k.kernel.ptr), cfg)
    print(f"CLUSTER_M={cm}: grid {geo.grid[0]} blocks = {geo.grid[0] // cm} clusters; at most {n} resident ({err.name})")
