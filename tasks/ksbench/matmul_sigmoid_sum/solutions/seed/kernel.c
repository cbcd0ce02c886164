/* Seed: per row, gemm into a row buffer (OUT blocked by BJ so the block of h
 * stays in L1 while streaming rows of w), then the fused epilogue on the row. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef BJ
#define BJ 256
#endif

static inline float gelu_erf(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

void matmul_sigmoid_sum(const float* x, const float* w, const float* b, float* y,
        int64_t B, int64_t IN, int64_t OUT) {
#pragma omp parallel
    {
        float* h = malloc(sizeof(float) * OUT);
#pragma omp for
        for (int64_t r = 0; r < B; r++) {
            const float* xr = x + r * IN;
            for (int64_t j0 = 0; j0 < OUT; j0 += BJ) {
                int64_t j1 = j0 + BJ < OUT ? j0 + BJ : OUT;
                for (int64_t j = j0; j < j1; j++) h[j] = b[j];
                for (int64_t k = 0; k < IN; k++) {
                    float xv = xr[k];
                    const float* wr = w + k * OUT;
                    for (int64_t j = j0; j < j1; j++) h[j] += xv * wr[j];
                }
            }
            float s = 0.0f;
            for (int64_t j = 0; j < OUT; j++) s += 1.0f / (1.0f + expf(-h[j]));
            y[r] = s;
        }
        free(h);
    }
}
