/* Linear -> *2*scale -> clamp -> row logsumexp -> r * mish(r).  Parallel over blocks
 * of RB rows; the RB x OUT activations live in a per-block scratch buffer. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef RB
#define RB 4
#endif

void matmul_scale_residualadd_clamp_logsumexp_mish(const float* x, const float* w,
                                                   const float* b, float scale, float* y,
                                                   int64_t B, int64_t IN, int64_t OUT,
                                                   int64_t ONE) {
    (void)ONE;
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
                    float h = ar[j] * scale;
                    h = h + h;
                    h = h < -10.0f ? -10.0f : (h > 10.0f ? 10.0f : h);
                    ar[j] = h;
                    m = h > m ? h : m;
                }
                float s = 0.0f;
                for (int64_t j = 0; j < OUT; j++) s += expf(ar[j] - m);
                float lse = m + logf(s);
                float sp = (lse > 0.0f ? lse : 0.0f) + log1pf(expf(-fabsf(lse)));
                y[r] = lse * lse * tanhf(sp);
            }
        }
        free(acc);
    }
}
