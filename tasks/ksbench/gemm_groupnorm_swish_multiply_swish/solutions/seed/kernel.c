/* Linear -> GroupNorm(G groups) -> swish -> *mw -> swish.  Parallel over blocks of RB
 * rows; the linear output is accumulated directly in y, then normalized in place. */
#include <math.h>
#include <stdint.h>

#ifndef RB
#define RB 4
#endif

void gemm_groupnorm_swish_multiply_swish(const float* x, const float* w, const float* b,
                                         const float* gamma, const float* beta,
                                         const float* mw, float* y, int64_t B, int64_t IN,
                                         int64_t OUT, int64_t G) {
    int64_t nblk = (B + RB - 1) / RB;
    int64_t gs = OUT / G;
#pragma omp parallel for schedule(dynamic)
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t r0 = blk * RB, r1 = r0 + RB < B ? r0 + RB : B;
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = 0; j < OUT; j++) y[r * OUT + j] = b[j];
        for (int64_t k = 0; k < IN; k++) {
            const float* wr = w + k * OUT;
            for (int64_t r = r0; r < r1; r++) {
                float xv = x[r * IN + k];
                float* yr = y + r * OUT;
                for (int64_t j = 0; j < OUT; j++) yr[j] += xv * wr[j];
            }
        }
        for (int64_t r = r0; r < r1; r++) {
            for (int64_t g = 0; g < G; g++) {
                float* yg = y + r * OUT + g * gs;
                float s = 0.0f;
                for (int64_t j = 0; j < gs; j++) s += yg[j];
                float mean = s / (float)gs;
                float v = 0.0f;
                for (int64_t j = 0; j < gs; j++) {
                    float d = yg[j] - mean;
                    v += d * d;
                }
                float inv = 1.0f / sqrtf(v / (float)gs + 1e-5f);
                for (int64_t j = 0; j < gs; j++) {
                    int64_t c = g * gs + j;
                    float h = (yg[j] - mean) * inv * gamma[c] + beta[c];
                    h = h / (1.0f + expf(-h));
                    h = h * mw[c];
                    yg[j] = h / (1.0f + expf(-h));
                }
            }
        }
    }
}
