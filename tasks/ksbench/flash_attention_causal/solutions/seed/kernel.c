/* Seed: causal attention, one query row at a time.  OpenMP over (b, h, query block
 * of BQ rows); each row computes its S_i = i+1 scores into a scratch buffer, does a
 * max-subtracted softmax, then accumulates the weighted rows of v. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BQ
#define BQ 16
#endif

void flash_attention_causal(const float* q, const float* k, const float* v, float* o,
                            int64_t B, int64_t H, int64_t S, int64_t D) {
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t nqb = (S + BQ - 1) / BQ;
#pragma omp parallel
    {
        float* p = (float*)malloc(sizeof(float) * S);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < B * H * nqb; t++) {
            const int64_t bh = t / nqb, qb = t % nqb;
            const float* qh = q + bh * S * D;
            const float* kh = k + bh * S * D;
            const float* vh = v + bh * S * D;
            float* oh = o + bh * S * D;
            const int64_t i0 = qb * BQ, i1 = i0 + BQ < S ? i0 + BQ : S;
            for (int64_t i = i0; i < i1; i++) {
                const float* qi = qh + i * D;
                float m = -INFINITY;
                for (int64_t j = 0; j <= i; j++) {
                    const float* kj = kh + j * D;
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++) s += qi[d] * kj[d];
                    s *= scale;
                    p[j] = s;
                    if (s > m) m = s;
                }
                float sum = 0.0f;
                for (int64_t j = 0; j <= i; j++) {
                    p[j] = expf(p[j] - m);
                    sum += p[j];
                }
                const float inv = 1.0f / sum;
                float* oi = oh + i * D;
                memset(oi, 0, sizeof(float) * D);
                for (int64_t j = 0; j <= i; j++) {
                    const float w = p[j] * inv;
                    const float* vj = vh + j * D;
                    for (int64_t d = 0; d < D; d++) oi[d] += w * vj[d];
                }
            }
        }
        free(p);
    }
}
