/* Seed: one output row per iteration (OpenMP over rows), i-k-j matmul over
 * column blocks of BJ, then a two-pass LayerNorm of the row and an erf GELU. */
#include <math.h>
#include <stdint.h>

#ifndef BJ
#define BJ 256
#endif

void matmul_biasadd_layernorm_gelu(const float* x, const float* w, const float* b,
                                   const float* gamma, const float* beta, float* y,
                                   int64_t B, int64_t IN, int64_t OUT) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; i++) {
        const float* xr = x + i * IN;
        float* yr = y + i * OUT;
        for (int64_t j0 = 0; j0 < OUT; j0 += BJ) {
            int64_t j1 = j0 + BJ < OUT ? j0 + BJ : OUT;
            for (int64_t j = j0; j < j1; j++) yr[j] = b[j];
            for (int64_t k = 0; k < IN; k++) {
                float xv = xr[k];
                const float* wr = w + k * OUT;
                for (int64_t j = j0; j < j1; j++) yr[j] += xv * wr[j];
            }
        }
        float s = 0.0f;
        for (int64_t j = 0; j < OUT; j++) s += yr[j];
        float mean = s / (float)OUT;
        float ss = 0.0f;
        for (int64_t j = 0; j < OUT; j++) {
            float d = yr[j] - mean;
            ss += d * d;
        }
        float rstd = 1.0f / sqrtf(ss / (float)OUT + 1e-5f);
        for (int64_t j = 0; j < OUT; j++) {
            float h = (yr[j] - mean) * rstd * gamma[j] + beta[j];
            yr[j] = 0.5f * h * (1.0f + erff(h * 0.70710678118654752f));
        }
    }
}
