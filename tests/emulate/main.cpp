// Run the kernel in KERNEL (its `extern __shared__` array renamed to `smem`) on random A and B and
// compare C with a float64 product: main M N K gx gy gz bx by bz zero_c. Prints the relative error
// and the number of elements of C left as they were (C starts as NaN unless the kernel adds into it).
#include "shim.h"
#include KERNEL

int main(int argc, char** argv)
{
    if (argc != 11)
        return 2;
    const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
    gridDim = {unsigned(atoi(argv[4])), unsigned(atoi(argv[5])), unsigned(atoi(argv[6]))};
    blockDim = {unsigned(atoi(argv[7])), unsigned(atoi(argv[8])), unsigned(atoi(argv[9]))};
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N, atoi(argv[10]) ? 0.0f : NAN);
    srand(1);
    for (auto& a : A) a = rand() / float(RAND_MAX) - 0.5f;
    for (auto& b : B) b = rand() / float(RAND_MAX) - 0.5f;
    const unsigned T = blockDim.x * blockDim.y * blockDim.z;
    for (unsigned z = 0; z < gridDim.z; ++z)
        for (unsigned y = 0; y < gridDim.y; ++y)
            for (unsigned x = 0; x < gridDim.x; ++x) {
                blockIdx = {x, y, z};
                block_barrier = std::make_unique<std::barrier<>>(T);
                warp_barriers.clear();
                for (unsigned w = 0; w < (T + 31) / 32; ++w)
                    warp_barriers.push_back(std::make_unique<std::barrier<>>(min(32u, T - 32 * w)));
                std::vector<std::thread> threads;
                for (unsigned t = 0; t < T; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
                        gemm(A.data(), B.data(), C.data(), M, N, K);
                    });
                for (auto& t : threads)
                    t.join();
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
