#include <stdint.h>

/* Straightforward triple loop in i-k-j order (unit-stride inner loop). */
void matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        float* cr = c + i * N;
        for (int64_t j = 0; j < N; j++)
            cr[j] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            float aik = a[i * K + k];
            const float* br = b + k * N;
            for (int64_t j = 0; j < N; j++)
                cr[j] += aik * br[j];
        }
    }
}
