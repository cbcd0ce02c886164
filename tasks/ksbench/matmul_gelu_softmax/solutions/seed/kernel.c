/* Linear -> exact (erf) GELU -> row softmax.  Parallel over blocks of RB rows; the
 * linear output is accumulated in y, then activated and normalized in place. */
#include <math.h>
#include <stdint.h>

#ifndef RB
#define RB 4
#endif

void matmul_gelu_softmax(const float* x, const float* w, const float* b, float* y,
                         int64_t B, int64_t IN, int64_t OUT) {
    int64_t nblk = (B + RB - 1) / RB;
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
            float* yr = y + r * OUT;
            float m = -INFINITY;
            for (int64_t j = 0; j < OUT; j++) {
                float h = yr[j];
                float g = 0.5f * h * (1.0f + erff(h * 0.70710678118654752f));
                yr[j] = g;
                m = g > m ? g : m;
            }
            float s = 0.0f;
            for (int64_t j = 0; j < OUT; j++) {
                float e = expf(yr[j] - m);
                yr[j] = e;
                s += e;
            }
            float inv = 1.0f / s;
            for (int64_t j = 0; j < OUT; j++) yr[j] *= inv;
        }
    }
}
