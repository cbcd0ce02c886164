/* Seed: paged decode attention.  OpenMP over (b, h) with dynamic scheduling (the
 * sequences are ragged).  For each pair: walk the sequence's tokens through the
 * block table, score into a scratch buffer, max-subtracted softmax, weighted sum
 * of the v rows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef CHUNK
#define CHUNK 1
#endif

void paged_attention_decode(const float* q, const float* k_cache, const float* v_cache,
                            const int32_t* block_table, const int32_t* seq_lens, float* o,
                            int64_t B, int64_t H, int64_t MAX_BLOCKS, int64_t NUM_BLOCKS,
                            int64_t BLOCK_SIZE, int64_t D) {
    (void)NUM_BLOCKS;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel
    {
        float* p = (float*)malloc(sizeof(float) * MAX_BLOCKS * BLOCK_SIZE);
#pragma omp for schedule(dynamic, CHUNK)
        for (int64_t bh = 0; bh < B * H; bh++) {
            const int64_t b = bh / H, h = bh % H;
            const int64_t len = seq_lens[b];
            const int32_t* bt = block_table + b * MAX_BLOCKS;
            const float* qv = q + bh * D;
            float m = -INFINITY;
            for (int64_t t = 0; t < len; t++) {
                const int64_t row = (int64_t)bt[t / BLOCK_SIZE] * BLOCK_SIZE + t % BLOCK_SIZE;
                const float* kt = k_cache + (row * H + h) * D;
                float s = 0.0f;
                for (int64_t d = 0; d < D; d++) s += qv[d] * kt[d];
                s *= scale;
                p[t] = s;
                if (s > m) m = s;
            }
            float sum = 0.0f;
            for (int64_t t = 0; t < len; t++) {
                p[t] = expf(p[t] - m);
                sum += p[t];
            }
            const float inv = 1.0f / sum;
            float* ov = o + bh * D;
            memset(ov, 0, sizeof(float) * D);
            for (int64_t t = 0; t < len; t++) {
                const int64_t row = (int64_t)bt[t / BLOCK_SIZE] * BLOCK_SIZE + t % BLOCK_SIZE;
                const float* vt = v_cache + (row * H + h) * D;
                const float w = p[t] * inv;
                for (int64_t d = 0; d < D; d++) ov[d] += w * vt[d];
            }
        }
        free(p);
    }
}
