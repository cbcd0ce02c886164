/* Seed: OpenMP over rows, i-k-j matmul over column blocks of BJ accumulating on
 * top of both biases, then ReLU on the finished block. */
#include <stdint.h>

#ifndef BJ
#define BJ 256
#endif

void gemm_add_relu(const float* x, const float* w, const float* b, const float* bias2,
                   float* y, int64_t B, int64_t IN, int64_t OUT) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; i++) {
        const float* xr = x + i * IN;
        float* yr = y + i * OUT;
        for (int64_t j0 = 0; j0 < OUT; j0 += BJ) {
            int64_t j1 = j0 + BJ < OUT ? j0 + BJ : OUT;
            for (int64_t j = j0; j < j1; j++) yr[j] = 0.0f;
            for (int64_t k = 0; k < IN; k++) {
                float xv = xr[k];
                const float* wr = w + k * OUT;
                for (int64_t j = j0; j < j1; j++) yr[j] += xv * wr[j];
            }
            for (int64_t j = j0; j < j1; j++) {
                float h = yr[j] + b[j] + bias2[j];
                yr[j] = h > 0.0f ? h : 0.0f;
            }
        }
    }
}
