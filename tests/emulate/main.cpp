// Run the kernel in KERNEL (its `extern __shared__` array renamed to `smem`) on random A and B and
// compare C with a float64 product:
//     main M N K gx gy gz bx by bz zero_c workspace_floats rgx rgy rgz rbx rby rbz launches
// Built with -DWORKSPACE, gemm gets a float workspace (NaN at first) after K; with -DREDUCE, the
// kernel `reduce(W, C, M, N, K)` runs after it on grid rg and block rb (split K's second kernel).
// The kernel runs `launches` times, C set before each (NaN, or 0 if zero_c), so that a kernel which keeps
// state from one launch to the next (split.j2's counters) must be right on the later ones too. Prints the
// relative error after the last launch and the number of elements of C left as they were.
#include "shim.h"
#include KERNEL

// Every block of the grid, one after another; each block one std::thread per CUDA thread.
template <class Kernel>
void run_grid(dim3 grid, dim3 block, Kernel kernel)
{
    gridDim = grid;
    blockDim = block;
    const unsigned T = block.x * block.y * block.z;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
                blockIdx = {x, y, z};
                block_barrier = std::make_unique<std::barrier<>>(T);
                warp_barriers.clear();
                for (unsigned w = 0; w < (T + 31) / 32; ++w)
                    warp_barriers.push_back(std::make_unique<std::barrier<>>(min(32u, T - 32 * w)));
                std::vector<std::thread> threads;
                for (unsigned t = 0; t < T; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
                        kernel();
                    });
                for (auto& t : threads)
                    t.join();
            }
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
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N, a[9] ? 0.0f : NAN), W(size_t(a[10]), NAN);
    srand(1);
    for (auto& x : A) x = rand() / float(RAND_MAX) - 0.5f;
    for (auto& x : B) x = rand() / float(RAND_MAX) - 0.5f;
    for (int launch = 0; launch < a[17]; ++launch) {
        std::fill(C.begin(), C.end(), a[9] ? 0.0f : NAN);
#ifdef WORKSPACE
        run_grid(grid, block, [&] { gemm(A.data(), B.data(), C.data(), M, N, K, W.data()); });
#else
        run_grid(grid, block, [&] { gemm(A.data(), B.data(), C.data(), M, N, K); });
#endif
#ifdef REDUCE
        run_grid({unsigned(a[11]), unsigned(a[12]), unsigned(a[13])}, {unsigned(a[14]), unsigned(a[15]), unsigned(a[16])},
                 [&] { reduce(W.data(), C.data(), M, N, K); });
#endif
    }
    double err = 0, norm = 0;
    long unwritten = 0;
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double s = 0;
            for (int k = 0; k < K; ++k)
                s += double(A[size_t(m) * K + k]) * B[size_t(k) * N + n];
            const float c = C[size_t(m) * N + n];
            unwritten += std::isnan(c);
            err = std::isnan(c) ? err : max(err, std::fabs(s - c));
            norm = max(norm, std::fabs(s));
        }
    printf("%.3e %ld\n", err / max(norm, 1e-30), unwritten);
    return 0;
}
