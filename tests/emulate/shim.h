// Just enough CUDA to run a plain kernel on the CPU: one std::thread per CUDA thread of a block,
// the blocks one after another. __shared__ arrays become function statics (one copy, seen by every
// thread), `extern __shared__` memory is the array `smem` below, and __syncthreads/__syncwarp are
// std::barriers. cp.async copies (rewritten by the test into calls of cp_async_now) happen at once,
// so a missing wait goes unseen here. What a kernel computes is checked; how fast it would run is not.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
using std::max;
using std::min;

struct dim3 { unsigned x, y, z; };
thread_local dim3 threadIdx;
dim3 blockIdx, blockDim, gridDim;
struct float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

std::unique_ptr<std::barrier<>> block_barrier;
std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
inline unsigned linear_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { warp_barriers[linear_thread() / 32]->arrive_and_wait(); }
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline void store_release_now(unsigned* p, unsigned v) { std::atomic_ref<unsigned>(*p).store(v, std::memory_order_release); }
inline unsigned load_acquire_now(const unsigned* p)
{
    return std::atomic_ref<unsigned>(*const_cast<unsigned*>(p)).load(std::memory_order_acquire);
}
// A warp shuffle: each lane posts its value, the warp meets, each reads its partner's, the warp meets again.
float shuffle_board[32][32];  // [warp][lane]
inline float __shfl_xor_sync(unsigned, float v, int mask)
{
    const unsigned w = linear_thread() / 32, l = linear_thread() % 32;
    shuffle_board[w][l] = v;
    __syncwarp();
    const float partner = shuffle_board[w][l ^ mask];
    __syncwarp();
    return partner;
}

alignas(128) float smem[1 << 16];  // dynamic shared memory: 256 KB, more than an SM has

// A shared-memory address as cp.async takes it, and cp.async itself: `bytes` of the `size` come from
// src, the rest are zeros (src-size < cp-size), done now instead of in the background.
inline unsigned __cvta_generic_to_shared(const void* p) { return unsigned((const char*)p - (const char*)smem); }
inline void cp_async_now(unsigned dst, const void* src, int size, int bytes)
{
    char* d = (char*)smem + dst;
    memcpy(d, src, bytes);
    memset(d + bytes, 0, size - bytes);
}

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n)
