/* Seed: OpenMP over rows; each row's linear output is built in a scratch row
 * (i-k-j over column blocks of BJ), then a max-subtracted logsumexp and the
 * scalar activation chain. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef BJ
#define BJ 256
#endif

static float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

void gemm_logsumexp_leakyrelu_gelu(const float* x, const float* w, const float* b, float* y,
                                   int64_t B, int64_t IN, int64_t OUT, int64_t U) {
    (void)U;
#pragma omp parallel
    {
        float* h = malloc(sizeof(float) * OUT);
#pragma omp for schedule(static)
        for (int64_t i = 0; i < B; i++) {
            const float* xr = x + i * IN;
            for (int64_t j0 = 0; j0 < OUT; j0 += BJ) {
                int64_t j1 = j0 + BJ < OUT ? j0 + BJ : OUT;
                for (int64_t j = j0; j < j1; j++) h[j] = b[j];
                for (int64_t k = 0; k < IN; k++) {
                    float xv = xr[k];
                    const float* wr = w + k * OUT;
                    for (int64_t j = j0; j < j1; j++) h[j] += xv * wr[j];
                }
            }
            float m = h[0];
            for (int64_t j = 1; j < OUT; j++) m = h[j] > m ? h[j] : m;
            float s = 0.0f;
            for (int64_t j = 0; j < OUT; j++) s += expf(h[j] - m);
            float r = m + logf(s);
            r = r >= 0.0f ? r : 0.01f * r;
            r = r >= 0.0f ? r : 0.01f * r;
            y[i] = gelu(gelu(r));
        }
        free(h);
    }
}
