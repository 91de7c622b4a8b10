"""When does the L2's request coalescer serve two SMs' loads of the same lines once? A microbenchmark for ncu's
lrc__* counters (run 54). One block per SM (132), each copying CHUNKS chunks of 16 KB one after another from a region of
global memory into shared memory (cp.async.bulk, one in flight). Blocks share regions in pairs:
  tpc   the two SMs of a TPC (smid s and s ^ 1), as the two blocks of an SM pair without clusters
  next  SMs of neighbouring TPCs (s and s ^ 2), as the blocks of two neighbouring 2-block clusters
  none  every SM its own region
  gpc   SMs of two different TPCs of one GPC (run 55, the GPCs from gpcmap.py)
  xgpc  SMs of two different GPCs
  gpc_all  all the SMs of a GPC read one region together
All blocks start together (a %globaltimer moment set by block 0); in each pair one block waits DELAY cycles
first. The L2 is cold (flushed) or warm (the regions read just before). Prints the launches in order, for ncu.
With CHUNKS=64 the 132 regions (138 MB) do not fit in the L2, so "warm" is mostly cold too; CHUNKS=16 (33 MB) fits.
Usage: [CHUNKS=64] ncu --cache-control none -k regex:probe --metrics ... python3 benchmarks/power-steps/merge.py"""
import os
import cupy as cp

SRC = r"""
extern "C" __global__ void __launch_bounds__(128, 1)
probe(const char* __restrict__ src, unsigned long long* t0slot, int mode, int delay, int chunks, const int* tab)
{
    extern __shared__ __align__(128) unsigned char buf[];  // 2 x 16 KB, and padding to keep one block per SM
    __shared__ __align__(8) unsigned long long bar;
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    int region = smid, late = 0;
    if (mode == 0) region = smid / 2, late = smid & 1;                      // tpc
    else if (mode == 1) region = smid / 4 * 2 + (smid & 1), late = smid >> 1 & 1;  // next
    else if (mode == 3) region = tab[2 * smid], late = tab[2 * smid + 1];          // from a table
    const char* base = src + (size_t)region * chunks * 16384;
    if (threadIdx.x != 0)
        return;
    const unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    unsigned long long now, t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (blockIdx.x == 0)
        atomicExch(t0slot, now + 20000);  // all start 20 us from here
    while ((t0 = atomicAdd(t0slot, 0ull)) == 0) {}
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); while (now < t0);
    const long long c0 = clock64();
    if (late)
        while (clock64() - c0 < delay) {}
    for (int i = 0; i < chunks; ++i) {
        const unsigned dst = (unsigned)__cvta_generic_to_shared(buf + (i & 1) * 16384);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16384;" :: "r"(b) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 16384, [%2];"
                     :: "r"(dst), "l"(base + (size_t)i * 16384), "r"(b) : "memory");
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(b), "r"(i & 1) : "memory");
    }
}
extern "C" __global__ void warm(const int4* __restrict__ src, size_t n, int* sink)
{
    int4 acc = make_int4(0, 0, 0, 0);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int4 v = src[i];
        acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
    }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345678)
        *sink = 1;
}
"""
DELAYS = tuple(int(d) for d in os.environ.get("DELAYS", "0,100,300,1000,3000").split(","))  # cycles
CHUNKS, SMEM = int(os.environ.get("CHUNKS", 64)), 200 * 1024  # 16 KB chunks per region
mod = cp.RawModule(code=SRC, options=("--gpu-architecture=sm_90a",))
probe, warm = mod.get_function("probe"), mod.get_function("warm")
probe.max_dynamic_shared_size_bytes = SMEM
src = cp.random.randint(0, 2**31, size=132 * CHUNKS * 16384 // 4, dtype=cp.int32)
flush = cp.empty(256 << 20, dtype=cp.uint8)
t0slot = cp.zeros(1, dtype=cp.uint64)
sink = cp.zeros(1, dtype=cp.int32)


def tables():
    """(name, table) for the modes that need the GPC map: smid -> (region, late)."""
    from gpcmap import gpc_map
    gpcs = gpc_map()
    print("GPCs:", gpcs, flush=True)
    out = {}
    tab = {}
    for sms in gpcs:  # pair TPC 2i with TPC 2i+1 of the same GPC, SM by SM
        tpcs = sorted({s // 2 for s in sms})
        for i in range(0, len(tpcs) - 1, 2):
            for k in (0, 1):
                a, b = 2 * tpcs[i] + k, 2 * tpcs[i + 1] + k
                tab[a], tab[b] = (a, 0), (a, 1)
    out["gpc"] = tab
    tab = {}
    for g in range(0, len(gpcs) - 1, 2):  # SM j of GPC g with SM j of GPC g+1
        for a, b in zip(gpcs[g], gpcs[g + 1]):
            tab[a], tab[b] = (a, 0), (a, 1)
    out["xgpc"] = tab
    out["gpc_all"] = {s: (sms[0], 0) for sms in gpcs for s in sms}
    result = {}
    for name, tab in out.items():
        arr = [0] * 264
        used = set(tab)
        for s in range(132):  # SMs left out read a region of their own, never shared (regions 132 + ...)
            region, late = tab.get(s, (s, 0))
            arr[2 * s], arr[2 * s + 1] = region, late
        result[name] = (cp.asarray(arr, dtype=cp.int32), len(used))
    return result


MODES = os.environ.get("MODES", "none,tpc,next").split(",")
L2S = os.environ.get("L2S", "cold,warm").split(",")
TABLES = tables() if {"gpc", "xgpc", "gpc_all"} & set(MODES) else {}
NOTAB = cp.zeros(264, dtype=cp.int32)
n = 0
for l2 in L2S:
    for name in MODES:
        mode = {"tpc": 0, "next": 1, "none": 2}.get(name, 3)
        tab, used = TABLES.get(name, (NOTAB, 132))
        for delay in ((0,) if name in ("none", "gpc_all") else DELAYS):
            flush.fill(0)
            if l2 == "warm":
                warm((264,), (512,), (src, cp.uint64(src.nbytes // 16), sink))
            t0slot.fill(0)
            probe((132,), (128,), (src, t0slot, cp.int32(mode), cp.int32(delay), cp.int32(CHUNKS), tab), shared_mem=SMEM)
            cp.cuda.Device().synchronize()
            n += 1
            print(f"launch {n}: L2 {l2}, pairs {name} ({used} SMs shared), delay {delay}", flush=True)
