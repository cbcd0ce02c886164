/* Seed GEMM: c = a @ b.  The output is cut into BM x BN tiles, processed in
 * parallel (one parallel region; tiles over both M and N so that few-row decode
 * shapes still spread over the threads).  Within a tile the K loop is blocked by
 * BK so the BK x BN panel of b stays in cache across the BM rows; i-k-j order
 * makes the inner j loop a contiguous axpy that the compiler vectorizes. */
#include <stdint.h>
#include <string.h>

#ifndef BM
#define BM 16
#endif
#ifndef BK
#define BK 256
#endif
#ifndef BN
#define BN 256
#endif

void gemm(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
    int64_t tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tm * tn; t++) {
        int64_t i0 = (t / tn) * BM, j0 = (t % tn) * BN;
        int64_t i1 = i0 + BM < M ? i0 + BM : M;
        int64_t j1 = j0 + BN < N ? j0 + BN : N;
        for (int64_t i = i0; i < i1; i++) memset(c + i * N + j0, 0, (size_t)(j1 - j0) * sizeof(float));
        for (int64_t k0 = 0; k0 < K; k0 += BK) {
            int64_t k1 = k0 + BK < K ? k0 + BK : K;
            for (int64_t i = i0; i < i1; i++) {
                const float* ar = a + i * K;
                float* cr = c + i * N;
                for (int64_t k = k0; k < k1; k++) {
                    float av = ar[k];
                    const float* br = b + k * N;
                    for (int64_t j = j0; j < j1; j++) cr[j] += av * br[j];
                }
            }
        }
    }
}
