/* Linear -> sigmoid -> row logsumexp.  Parallel over blocks of RB rows; the RB x OUT
 * activations live in a per-thread scratch buffer. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef RB
#define RB 4
#endif

void gemm_sigmoid_sum_logsumexp(const float* x, const float* w, const float* b, float* y,
                                int64_t B, int64_t IN, int64_t OUT) {
    int64_t nblk = (B + RB - 1) / RB;
#pragma omp parallel
    {
        float* acc = malloc(sizeof(float) * RB * OUT);
#pragma omp for schedule(dynamic)
        for (int64_t blk = 0; blk < nblk; blk++) {
            int64_t r0 = blk * RB, r1 = r0 + RB < B ? r0 + RB : B;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t j = 0; j < OUT; j++) acc[(r - r0) * OUT + j] = b[j];
            for (int64_t k = 0; k < IN; k++) {
                const float* wr = w + k * OUT;
                for (int64_t r = r0; r < r1; r++) {
                    float xv = x[r * IN + k];
                    float* ar = acc + (r - r0) * OUT;
                    for (int64_t j = 0; j < OUT; j++) ar[j] += xv * wr[j];
                }
            }
            for (int64_t r = r0; r < r1; r++) {
                float* ar = acc + (r - r0) * OUT;
                float m = -INFINITY;
                for (int64_t j = 0; j < OUT; j++) {
                    float s = 1.0f / (1.0f + expf(-ar[j]));
                    ar[j] = s;
                    m = s > m ? s : m;
                }
                float sum = 0.0f;
                for (int64_t j = 0; j < OUT; j++) sum += expf(ar[j] - m);
                y[r] = m + logf(sum);
            }
        }
        free(acc);
    }
}
