// Just enough CUDA to run a plain kernel on the CPU: each CUDA thread of a block is a fiber (ucontext), the
// blocks one after another. A fiber runs until it waits at a barrier (__syncthreads, __syncwarp) or ends,
// then the next one runs, in thread order: one OS thread, no locks, so threads meeting at a barrier cost
// a few context switches in user space instead of a round of futex wake-ups (one std::thread per CUDA
// thread made the skinny rungs' tests take 10-60 s each). __shared__ arrays become function statics (one
// copy, seen by every thread), `extern __shared__` memory is the array `smem` below. cp.async copies
// (rewritten by the test into calls of cp_async_now) happen at once, so a missing wait goes unseen here.
// What a kernel computes is checked; how fast it would run is not. Only C headers and no STL: the
// emulator is compiled once per kernel, and <thread>, <barrier>, <vector> and the like took most of it.
// Not <cmath> either (0.3 s of a 0.45 s build, for C++20's overloads): the few math functions a kernel or
// main.cpp uses are the compiler's builtins below.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <setjmp.h>
#include <ucontext.h>

#define NAN __builtin_nanf("")
inline bool isnan(double x) { return __builtin_isnan(x); }
inline double fabs(double x) { return __builtin_fabs(x); }
inline float fabsf(float x) { return __builtin_fabsf(x); }
inline float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
inline float fminf(float a, float b) { return __builtin_fminf(a, b); }
inline float sqrtf(float x) { return __builtin_sqrtf(x); }
inline float expf(float x) { return __builtin_expf(x); }

template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }

struct dim3 { unsigned x, y, z; };
dim3 threadIdx, blockIdx, blockDim, gridDim;  // threadIdx: the running fiber's (run_grid sets it)
struct alignas(16) float4 { float x, y, z, w; };  // CUDA's alignment: a misaligned access fails (-fsanitize=alignment)
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
// What the 16-bit rungs that read their inputs as raw words use (gemv): the types (their headers,
// cuda_bf16.h and cuda_fp16.h beside this file, are empty), 16-byte words, bit casts, __ldg, the funnel
// shift, and FP16's conversion to FP32 (main.cpp makes the inputs).
struct __nv_bfloat16 { unsigned short bits; };
struct __half { unsigned short bits; };
struct __half2 { __half x, y; };
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
template <class T> inline T __ldg(const T* p) { return *p; }
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift)
{
    return unsigned((static_cast<unsigned long long>(hi) << 32 | lo) >> (shift & 31));
}
inline float __half2float(__half h)  // exact: every FP16 value is an FP32 one
{
    const unsigned sign = (h.bits & 0x8000u) << 16, exp = h.bits >> 10 & 31, man = h.bits & 1023;
    if (exp == 0)  // zero or subnormal: man x 2^-24
        return __uint_as_float(sign) + (sign ? -1.0f : 1.0f) * man * (1.0f / 16777216.0f);
    return __uint_as_float(sign | (exp == 31 ? 255u : exp + 112) << 23 | man << 13);
}
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }

// The fibers of the block that runs (run_grid in main.cpp), and the scheduler they yield to. A fiber starts
// on its own stack with setcontext (makecontext made it); every later switch is _setjmp/_longjmp, which
// keep no signal mask: swapcontext's two sigprocmask calls a switch were a third of the emulated tests' time.
struct Fiber { ucontext_t ctx; jmp_buf at; dim3 tid; bool started, done; };
Fiber* current;
jmp_buf scheduler_at;
bool progress;  // a fiber arrived at a barrier or ended since the scheduler last looked
inline void yield_now()
{
    if (!_setjmp(current->at))
        _longjmp(scheduler_at, 1);
}

// A barrier of `expected` fibers: the last to arrive opens it and goes on; the others yield until it opens.
struct Barrier {
    unsigned expected = 0, arrived = 0, phase = 0;
    void arrive_and_wait()
    {
        progress = true;
        const unsigned mine = phase;
        if (++arrived == expected) {
            arrived = 0;
            ++phase;
            return;
        }
        while (phase == mine)
            yield_now();
    }
};
Barrier block_barrier;
Barrier warp_barriers[32];  // a block has at most 1024 threads
inline unsigned linear_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline void __syncthreads() { block_barrier.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { warp_barriers[linear_thread() / 32].arrive_and_wait(); }

// One fiber runs at a time and none is interrupted between two barriers: plain reads and writes are atomic.
inline float atomicAdd(float* p, float v) { const float old = *p; *p = old + v; return old; }
// sm_90's vector atomics (the emulator compiles the kernels' __CUDA_ARCH__ >= 900 paths, the H100's)
inline float2 atomicAdd(float2* p, float2 v) { const float2 old = *p; *p = {old.x + v.x, old.y + v.y}; return old; }
inline float4 atomicAdd(float4* p, float4 v)
{
    const float4 old = *p;
    *p = {old.x + v.x, old.y + v.y, old.z + v.z, old.w + v.w};
    return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { const unsigned old = *p; *p = old + v; return old; }
inline void store_release_now(unsigned* p, unsigned v) { *p = v; }
inline unsigned load_acquire_now(const unsigned* p) { return *p; }
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
unsigned shuffle_words[32][32];  // [warp][lane]
inline unsigned __shfl_down_sync(unsigned, unsigned v, int delta)  // a lane past the warp's end keeps its own
{
    const unsigned w = linear_thread() / 32, l = linear_thread() % 32;
    const unsigned lanes = min(32u, blockDim.x * blockDim.y * blockDim.z - 32 * w);
    shuffle_words[w][l] = v;
    __syncwarp();
    const unsigned partner = l + delta < lanes ? shuffle_words[w][l + delta] : v;
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
