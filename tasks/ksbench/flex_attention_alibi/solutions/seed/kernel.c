/* Seed: causal sliding-window attention with ALiBi bias, one query row at a time.
 * OpenMP over (b, h, query block of BQ rows).  Row i visits keys
 * j in [max(0, i-W+1), i]: score = q.k * scale - slope[h] * (i - j), then a
 * max-subtracted softmax and a weighted sum of v. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BQ
#define BQ 16
#endif

void flex_attention_alibi(const float* q, const float* k, const float* v, const float* slopes,
                          float* o, int64_t B, int64_t H, int64_t S, int64_t W, int64_t D) {
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t nqb = (S + BQ - 1) / BQ;
#pragma omp parallel
    {
        float* p = (float*)malloc(sizeof(float) * (W < S ? W : S));
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < B * H * nqb; t++) {
            const int64_t bh = t / nqb, qb = t % nqb;
            const float slope = slopes[bh % H];
            const float* qh = q + bh * S * D;
            const float* kh = k + bh * S * D;
            const float* vh = v + bh * S * D;
            float* oh = o + bh * S * D;
            const int64_t i0 = qb * BQ, i1 = i0 + BQ < S ? i0 + BQ : S;
            for (int64_t i = i0; i < i1; i++) {
                const int64_t j0 = i - W + 1 > 0 ? i - W + 1 : 0;
                const float* qi = qh + i * D;
                float m = -INFINITY;
                for (int64_t j = j0; j <= i; j++) {
                    const float* kj = kh + j * D;
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++) s += qi[d] * kj[d];
                    s = s * scale - slope * (float)(i - j);
                    p[j - j0] = s;
                    if (s > m) m = s;
                }
                float sum = 0.0f;
                for (int64_t j = j0; j <= i; j++) {
                    p[j - j0] = expf(p[j - j0] - m);
                    sum += p[j - j0];
                }
                const float inv = 1.0f / sum;
                float* oi = oh + i * D;
                memset(oi, 0, sizeof(float) * D);
                for (int64_t j = j0; j <= i; j++) {
                    const float w = p[j - j0] * inv;
                    const float* vj = vh + j * D;
                    for (int64_t d = 0; d < D; d++) oi[d] += w * vj[d];
                }
            }
        }
        free(p);
    }
}
