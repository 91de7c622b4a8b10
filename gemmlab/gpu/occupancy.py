"""Seed 001, part 1: how many warps per SM does a memory-bound kernel need to reach peak bandwidth?

A grid-stride float4 copy is launched with one wave of blocks, and dynamic shared memory reserved per
block so that exactly the wanted number of blocks fits on an SM: occupancy is forced from 1 warp per
SM up to the maximum. Each warp has one 16-byte load per thread (512 bytes) in flight, so by Little's
law (bytes in flight = bandwidth x latency) the bandwidth at 1 warp per SM gives the memory latency,
and the latency gives the bytes in flight, and so the warps, that peak bandwidth needs.

The arithmetic is plain Python (tested on a CPU); `measure` runs in a worker process.
"""

from __future__ import annotations

import math

SOURCE = r"""
extern "C" __global__ void copy(const float4* __restrict__ src, float4* __restrict__ dst, long long n)
{
    extern __shared__ float reserved[];  // never used: its size sets how many blocks fit on an SM
    #pragma unroll 1  // no unrolling: the store waits for its load, so one 16-byte load in flight per thread
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
"""
WARPS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
BYTES_IN_FLIGHT_PER_WARP = 32 * 16


def plan(warps_per_sm: int, max_warps: int) -> tuple[int, int] | None:
    """(threads per block, blocks per SM) for a warp count: 1-warp blocks up to 32 blocks an SM (the
    hardware's limit), 2-warp blocks above. None when the SM cannot hold that many warps."""
    if warps_per_sm > max_warps:
        return None
    if warps_per_sm <= 32:
        return 32, warps_per_sm
    return (64, warps_per_sm // 2) if warps_per_sm % 2 == 0 else None


def smem_for(blocks_per_sm: int, smem_per_sm: int, reserved_per_block: int = 1024, optin: int = 227 * 1024) -> int:
    """Dynamic shared memory per block so that at most `blocks_per_sm` blocks fit: the SM's shared
    memory split that many ways (less the 1 KB the hardware reserves per block), plus a little, so
    that one more block would not fit."""
    share = smem_per_sm // blocks_per_sm - reserved_per_block
    more = smem_per_sm // (blocks_per_sm + 1) - reserved_per_block
    return max(0, min(optin, more + 128 if blocks_per_sm > 1 else share))


def littles_law(rows: list[dict], sms: int, peak_bw: float) -> dict:
    """Latency from the 1-warp-per-SM point, then the bytes in flight and warps per SM peak needs."""
    one = next((r for r in rows if r["warps_per_sm"] == 1 and r["bandwidth"]), None)
    if not one:
        return {}
    latency = BYTES_IN_FLIGHT_PER_WARP * sms / one["bandwidth"]
    in_flight = peak_bw * latency
    return {"latency_ns": latency * 1e9, "bytes_in_flight": in_flight,
            "warps_per_sm_needed": math.ceil(in_flight / (BYTES_IN_FLIGHT_PER_WARP * sms))}


def measure(phase=None, nbytes: int = 1 << 30) -> list[dict]:
    """On the GPU (in a worker): achieved copy bandwidth at each forced warp count."""
    from ..gpu.device import get_device
    from .driver import cuda
    from .bench import bench
    cupy = cuda()
    dev = get_device()
    kernel = cupy.RawKernel(SOURCE, "copy")
    n = nbytes // 16
    src = cupy.ones(n * 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    rows = []
    for warps in WARPS:
        p = plan(warps, dev.max_threads_per_sm // 32)
        if p is None:
            continue
        threads, blocks = p
        smem = smem_for(blocks, dev.smem_per_sm, optin=dev.smem_optin)
        kernel.max_dynamic_shared_size_bytes = max(smem, 1)
        got = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, smem)
        if phase:
            phase(f"copy at {warps} warps per SM")
        grid = dev.sms * got  # one wave: every block stays resident
        t = bench(lambda: kernel((grid,), (threads,), (src, dst, cupy.int64(n)), shared_mem=smem),
                  min_reps=10, flush=False)
        bw = 2 * nbytes / (t.median_ms * 1e-3)
        rows.append({"warps_per_sm": got * threads // 32, "blocks_per_sm": got, "threads_per_block": threads,
                     "smem_per_block": smem, "occupancy_pct": 100 * got * threads / dev.max_threads_per_sm,
                     "bandwidth": bw, "ms": t.median_ms})
    if not bool((dst[:8] == 1).all()):
        from ..errors import GemmlabError
        raise GemmlabError("the copy kernel did not copy: its bandwidth would mean nothing")
    return rows
