/* Seed: block-sparse attention, one query row at a time.  OpenMP over (b, h, row)
 * with dynamic scheduling (rows of different query blocks enable different numbers
 * of key blocks).  For each row: list the enabled key blocks, score them into a
 * scratch buffer, max-subtracted softmax, weighted sum of v. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef CHUNK
#define CHUNK 8
#endif

void block_sparse_attention(const float* q, const float* k, const float* v,
                            const int32_t* block_mask, float* o,
                            int64_t B, int64_t H, int64_t S, int64_t NB, int64_t BS, int64_t D) {
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel
    {
        float* p = (float*)malloc(sizeof(float) * S);
#pragma omp for schedule(dynamic, CHUNK)
        for (int64_t t = 0; t < B * H * S; t++) {
            const int64_t bh = t / S, i = t % S;
            const int64_t h = bh % H;
            const int32_t* mrow = block_mask + (h * NB + i / BS) * NB;
            const float* qi = q + t * D;
            const float* kh = k + bh * S * D;
            const float* vh = v + bh * S * D;

            float m = -INFINITY;
            int64_t n = 0;
            for (int64_t kb = 0; kb < NB; kb++) {
                if (!mrow[kb]) continue;
                for (int64_t j = kb * BS; j < (kb + 1) * BS; j++) {
                    const float* kj = kh + j * D;
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++) s += qi[d] * kj[d];
                    s *= scale;
                    p[n++] = s;
                    if (s > m) m = s;
                }
            }
            float sum = 0.0f;
            for (int64_t x = 0; x < n; x++) {
                p[x] = expf(p[x] - m);
                sum += p[x];
            }
            const float inv = 1.0f / sum;
            float* oi = o + t * D;
            memset(oi, 0, sizeof(float) * D);
            n = 0;
            for (int64_t kb = 0; kb < NB; kb++) {
                if (!mrow[kb]) continue;
                for (int64_t j = kb * BS; j < (kb + 1) * BS; j++) {
                    const float w = p[n++] * inv;
                    const float* vj = vh + j * D;
                    for (int64_t d = 0; d < D; d++) oi[d] += w * vj[d];
                }
            }
        }
        free(p);
    }
}
