/* Seed: per row, gemm into a row buffer (blocked over OUT by BJ), then the
 * fused batchnorm/gelu/groupnorm/mean/relu epilogue on the row. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef BJ
#define BJ 256
#endif

void gemm_batchnorm_gelu_groupnorm_mean_relu(
    const float* x, const float* w, const float* b, const float* rmean,
    const float* rvar, const float* bng, const float* bnb, const float* gng,
    const float* gnb, float* y, int64_t B, int64_t IN, int64_t OUT, int64_t G) {
    float* sc = malloc(sizeof(float) * OUT);
    float* sh = malloc(sizeof(float) * OUT);
    for (int64_t j = 0; j < OUT; j++) {
        sc[j] = bng[j] / sqrtf(rvar[j] + 1e-5f);
        sh[j] = bnb[j] - rmean[j] * sc[j];
    }
    int64_t CG = OUT / G;
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
            for (int64_t j = 0; j < OUT; j++) {
                float v = h[j] * sc[j] + sh[j];
                h[j] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
            }
            double tot = 0.0;
            for (int64_t g = 0; g < G; g++) {
                float* hg = h + g * CG;
                float s = 0.f;
                for (int64_t c = 0; c < CG; c++) s += hg[c];
                float mu = s / CG;
                float v2 = 0.f;
                for (int64_t c = 0; c < CG; c++) v2 += (hg[c] - mu) * (hg[c] - mu);
                float inv = 1.0f / sqrtf(v2 / CG + 1e-5f);
                float acc = 0.f;
                for (int64_t c = 0; c < CG; c++)
                    acc += (hg[c] - mu) * inv * gng[g * CG + c] + gnb[g * CG + c];
                tot += acc;
            }
            float m = (float)(tot / OUT);
            y[r] = m > 0.f ? m : 0.f;
        }
        free(h);
    }
    free(sc);
    free(sh);
}
