"""Run 32: how fast can one SM write C? Each of G blocks (256 threads) writes 128 KB (a 128 x 256 FP32 tile) from
registers, once, in one of three patterns, and records its clock64 before and after (after a __syncthreads and
a fence, so that the stores have left the SM); bytes per cycle per SM is 128 KB over the block's cycles. Before
each launch the L2 is either left full of the flush's dirty lines ("dirty", as right after do_bench's flush) or
made clean by reading 128 MB (as after a GEMM's K loop, whose reads have evicted them).
  full   float4, a warp covers 4 rows x 128 bytes (the staged store's pattern)
  half   float4, a warp covers 8 rows x 64 bytes (accumulator pairs exchanged by shuffles)
  pair   float2, a warp covers 8 rows x 32 bytes (the accumulators as they lie)
Usage: python3 benchmarks/power-steps/storebw.py"""
import numpy as np, cupy as cp
src = r'''
extern "C" __global__ void __launch_bounds__(256) w(float* out, long long* clk, int mode, int N)
{
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    float* tile = out + (size_t)blockIdx.x / 16 * 128 * N + (size_t)(blockIdx.x % 16) * 256;  // 128 x 256 tiles of an N-wide C
    const float v = t;
    __syncthreads();
    long long t0 = clock64();
    if (mode == 0) {  // 32 rounds: warp w writes rows 4 * (8 * i + w) .. + 3, lane -> row lane / 8, float4 lane % 8 of 32 cols
        for (int q = 0; q < 8; ++q)
            #pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int row = warp * 16 + i * 4 + lane / 8, col = q * 32 + lane % 8 * 4;
                *reinterpret_cast<float4*>(&tile[(size_t)row * N + col]) = make_float4(v, v, v, v);
            }
    } else if (mode == 1) {  // lane -> row lane / 4, 16 bytes of 64: a warp covers 8 rows x 64 bytes
        for (int j = 0; j < 16; ++j)
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = warp * 16 + h * 8 + lane / 4, col = j * 16 + lane % 4 * 4;
                *reinterpret_cast<float4*>(&tile[(size_t)row * N + col]) = make_float4(v, v, v, v);
            }
    } else {  // lane -> row lane / 4, 8 bytes of 32: a warp covers 8 rows x 32 bytes
        for (int j = 0; j < 32; ++j)
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = warp * 16 + h * 8 + lane / 4, col = j * 8 + lane % 4 * 2;
                *reinterpret_cast<float2*>(&tile[(size_t)row * N + col]) = make_float2(v, v);
            }
    }
    __threadfence();
    __syncthreads();
    if (t == 0) clk[blockIdx.x] = clock64() - t0;
}
'''
k = cp.RawModule(code=src).get_function("w")
N = 4096
C = cp.empty((N * 4, N), cp.float32)  # room for 512 tiles of 128 x 256
flush = cp.empty(256 << 20, cp.uint8)
reader = cp.ones(32 << 20, cp.float32)
print(f"{'L2':5s} {'pattern':6s} {'blocks':>6s} {'cycles (median)':>15s} {'p10':>7s} {'p90':>7s} {'B/clk/SM':>9s}")
for G, l2 in [(132, "dirty"), (132, "clean"), (66, "clean"), (16, "clean")]:
    for mode, name in enumerate(["full", "half", "pair"]):
        clk = cp.zeros(G, cp.int64)
        res = []
        for rep in range(5):
            flush.fill(0)
            if l2 == "clean":
                float(reader.sum())
            k((G,), (256,), (C, clk, np.int32(mode), np.int32(N)))
            cp.cuda.Device().synchronize()
            res.append(clk.get())
        c = np.concatenate(res[1:])
        print(f"{l2:5s} {name:6s} {G:6d} {np.median(c):15.0f} {np.percentile(c, 10):7.0f} {np.percentile(c, 90):7.0f} {131072 / np.median(c):9.1f}")
