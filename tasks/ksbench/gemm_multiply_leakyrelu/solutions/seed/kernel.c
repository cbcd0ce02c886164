/* Linear + multiply + leaky relu (slope 0.1).  Parallel over blocks of RB rows;
 * each w row is streamed once per block (inner loop over OUT vectorizes). */
#include <stdint.h>

#ifndef RB
#define RB 4
#endif

void gemm_multiply_leakyrelu(const float* x, const float* w, const float* b, float m,
                             float* y, int64_t B, int64_t IN, int64_t OUT) {
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
            for (int64_t j = 0; j < OUT; j++) {
                float h = yr[j] * m;
                yr[j] = h >= 0.0f ? h : 0.1f * h;
            }
        }
    }
}
