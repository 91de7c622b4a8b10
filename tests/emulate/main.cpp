// Run the kernel in KERNEL (its `extern __shared__` array renamed to `smem`) on random A and B and
// compare C with a float64 product:
//     main M N K gx gy gz bx by bz zero_c workspace_floats rgx rgy rgz rbx rby rbz launches
// Built with -DWORKSPACE, gemm gets a float workspace (NaN at first) after K; with -DREDUCE, the
// kernel `reduce(W, C, M, N, K)` runs after it on grid rg and block rb (split K's second kernel).
// The kernel runs `launches` times, C set before each (NaN, or 0 if zero_c), so that a kernel which keeps
// state from one launch to the next (split.j2's counters) must be right on the later ones too. Prints the
// relative error after the last launch and the number of elements of C left as they were.
// With -DINPUT_BF16 or -DINPUT_FP16, A and B are of that 16-bit type (C stays FP32), their values
// multiples of 1/256 in [-0.5, 0.5], which both types hold exactly: the float64 product of the same values
// is the reference.
#include "shim.h"
#include KERNEL

#if defined(INPUT_BF16)
typedef __nv_bfloat16 Input;
inline Input to_input(float x) { return {static_cast<unsigned short>(__float_as_uint(x) >> 16)}; }  // exact here
inline double value(Input x) { return __uint_as_float(unsigned(x.bits) << 16); }
const Input FENCE = {0x7fc0};  // NaN
#elif defined(INPUT_FP16)
typedef __half Input;
inline Input to_input(float x)  // exact for these values: normal in FP16, 10 bits of mantissa or fewer
{
    const unsigned u = __float_as_uint(x), exp = u >> 23 & 255;
    return {static_cast<unsigned short>(u >> 16 & 0x8000u | (exp ? (exp - 112) << 10 | (u >> 13 & 1023) : 0))};
}
inline double value(Input x) { return __half2float(x); }
const Input FENCE = {0x7e00};  // NaN
#else
typedef float Input;
inline Input to_input(float x) { return x; }
inline double value(Input x) { return x; }
#endif

// What every fiber of a grid runs: the kernel call, behind a plain function pointer (no <functional>).
void (*kernel_call)(void*);
void* kernel_args;
void fiber_main()
{
    kernel_call(kernel_args);
    current->done = true;
    progress = true;
    _longjmp(scheduler_at, 1);  // back to the scheduler for good
}

// Every block of the grid, one after another; each block one fiber per CUDA thread, run in turns in
// thread order until all of them have ended (shim.h). A block whose live threads all wait at barriers
// that none of the others will reach ends the run (exit status 3) instead of hanging.
template <class Kernel>
void run_grid(dim3 grid, dim3 block, Kernel kernel)
{
    constexpr size_t STACK = 256 << 10;  // a kernel's locals are a few KB; untouched pages cost nothing
    static char* stacks[1024];  // one per thread of a block, kept for the next block and grid
    static Fiber fibers[1024];
    gridDim = grid;
    blockDim = block;
    kernel_call = [](void* k) { (*static_cast<Kernel*>(k))(); };
    kernel_args = &kernel;
    const unsigned T = block.x * block.y * block.z;
    if (T == 0 || T > 1024) {
        fprintf(stderr, "a block of %u threads\n", T);
        exit(2);
    }
    for (unsigned t = 0; t < T; ++t)
        if (!stacks[t])
            stacks[t] = static_cast<char*>(malloc(STACK));
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = {x, y, z};
                block_barrier = Barrier{T};
                for (unsigned w = 0; w < (T + 31) / 32; ++w)
                    warp_barriers[w] = Barrier{min(32u, T - 32 * w)};
                for (unsigned t = 0; t < T; ++t) {
                    Fiber& f = fibers[t];
                    f.tid = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
                    f.started = f.done = false;
                    getcontext(&f.ctx);
                    f.ctx.uc_stack.ss_sp = stacks[t];
                    f.ctx.uc_stack.ss_size = STACK;
                    f.ctx.uc_link = nullptr;  // fiber_main never returns: it jumps back to the scheduler
                    makecontext(&f.ctx, fiber_main, 0);
                }
                for (unsigned live = T; live;) {
                    progress = false;
                    live = 0;
                    for (unsigned t = 0; t < T; ++t)
                        if (!fibers[t].done) {
                            current = &fibers[t];
                            threadIdx = current->tid;
                            if (!_setjmp(scheduler_at)) {
                                if (current->started)
                                    _longjmp(current->at, 1);
                                current->started = true;
                                setcontext(&current->ctx);
                            }
                            live += !current->done;
                        }
                    if (live && !progress) {
                        fprintf(stderr, "deadlock: in block (%u, %u, %u), %u threads wait at barriers the others never reach\n",
                                x, y, z, live);
                        exit(3);
                    }
                }
            }
}

float* filled(size_t n, float value)
{
    float* p = static_cast<float*>(malloc(max(n, size_t(1)) * sizeof(float)));
    for (size_t i = 0; i < n; ++i)
        p[i] = value;
    return p;
}

// Random inputs: FP32 as before; the 16-bit types in steps of 1/256, between 16 bytes of NaN on each side
// (malloc's 16-byte alignment kept), so that a kernel which multiplies what it reads past a matrix's
// ends, even by 0, makes NaN (as gpu/problem.py's fence does on the GPU).
Input* inputs(size_t n)
{
    Input* p = static_cast<Input*>(malloc((max(n, size_t(1)) + (sizeof(Input) == 2 ? 16 : 0)) * sizeof(Input)));
#if defined(INPUT_BF16) || defined(INPUT_FP16)
    for (size_t i = 0; i < 8; ++i)
        p[i] = p[n + 8 + i] = FENCE;
    p += 8;
#endif
    for (size_t i = 0; i < n; ++i)
        p[i] = sizeof(Input) == 4 ? to_input(rand() / float(RAND_MAX) - 0.5f) : to_input((rand() % 257 - 128) / 256.0f);
    return p;
}

int main(int argc, char** argv)
{
    if (argc != 19)
        return 2;
    int a[18];
    for (int i = 0; i < 18; ++i)
        a[i] = atoi(argv[i + 1]);
    const int M = a[0], N = a[1], K = a[2];
    const dim3 grid = {unsigned(a[3]), unsigned(a[4]), unsigned(a[5])}, block = {unsigned(a[6]), unsigned(a[7]), unsigned(a[8])};
    const size_t sizeA = size_t(M) * K, sizeB = size_t(K) * N, sizeC = size_t(M) * N;
    float *C = filled(sizeC, 0), *W = filled(size_t(a[10]), NAN);
    srand(1);
    Input* A = inputs(sizeA);
    Input* B = inputs(sizeB);
    for (int launch = 0; launch < a[17]; ++launch) {
        for (size_t i = 0; i < sizeC; ++i)
            C[i] = a[9] ? 0.0f : NAN;
#ifdef WORKSPACE
        run_grid(grid, block, [&] { gemm(A, B, C, M, N, K, W); });
#else
        run_grid(grid, block, [&] { gemm(A, B, C, M, N, K); });
#endif
#ifdef REDUCE
        run_grid({unsigned(a[11]), unsigned(a[12]), unsigned(a[13])}, {unsigned(a[14]), unsigned(a[15]), unsigned(a[16])},
                 [&] { reduce(W, C, M, N, K); });
#endif
    }
    double err = 0, norm = 0;
    long unwritten = 0;
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double s = 0;
            for (int k = 0; k < K; ++k)
                s += value(A[size_t(m) * K + k]) * value(B[size_t(k) * N + n]);
            const float c = C[size_t(m) * N + n];
            unwritten += isnan(c);
            err = isnan(c) ? err : max(err, fabs(s - c));
            norm = max(norm, fabs(s));
        }
    printf("%.3e %ld\n", err / max(norm, 1e-30), unwritten);
    return 0;
}
