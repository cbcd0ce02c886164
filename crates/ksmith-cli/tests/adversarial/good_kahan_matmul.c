// task: matmul; expect: PASSED
/* Correct matmul with a different summation order: k is split into blocks of 64;
 * each block's partial row (i-k-j order, vectorizable) is accumulated into c
 * with Kahan compensation, visiting the blocks from last to first.  OpenMP over
 * rows. */
#include <stdint.h>
#include <stdlib.h>

#define KB 64

void matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
#pragma omp parallel
    {
        float* part = malloc((size_t)N * sizeof(float));
        float* comp = malloc((size_t)N * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t i = 0; i < M; i++) {
            float* cr = c + i * N;
            for (int64_t j = 0; j < N; j++) {
                cr[j] = 0.0f;
                comp[j] = 0.0f;
            }
            int64_t nblk = (K + KB - 1) / KB;
            for (int64_t kb = nblk - 1; kb >= 0; kb--) {
                int64_t k0 = kb * KB, k1 = k0 + KB < K ? k0 + KB : K;
                for (int64_t j = 0; j < N; j++)
                    part[j] = 0.0f;
                for (int64_t k = k0; k < k1; k++) {
                    float aik = a[i * K + k];
                    const float* br = b + k * N;
                    for (int64_t j = 0; j < N; j++)
                        part[j] += aik * br[j];
                }
                for (int64_t j = 0; j < N; j++) { /* Kahan: cr += part */
                    float yv = part[j] - comp[j];
                    float t = cr[j] + yv;
                    comp[j] = (t - cr[j]) - yv;
                    cr[j] = t;
                }
            }
        }
        free(part);
        free(comp);
    }
}
