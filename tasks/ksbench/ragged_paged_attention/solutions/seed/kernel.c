/* Seed ragged paged attention (prefill, causal within each sequence).
 * Work is cut into tiles (sequence b, head h, block of QB consecutive queries of b);
 * tiles run in parallel with dynamic scheduling (causal + ragged = very uneven).
 * Per tile: scores of each query against keys 0..pos (key rows fetched through the
 * block table and shared by the QB queries), stable softmax per query (max
 * subtraction), then o = P V with the same shared value rows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef QB
#define QB 8
#endif

void ragged_paged_attention(const float* q, const float* k_cache, const float* v_cache,
                            const int32_t* cu_seqlens, const int32_t* block_table, float* o,
                            int64_t T, int64_t B, int64_t B1, int64_t H, int64_t NB, int64_t MB,
                            int64_t BS, int64_t D) {
    (void)T; (void)B1; (void)NB;
    const int64_t L = MB * BS;
    const float scale = 1.0f / sqrtf((float)D);
    const int64_t HD = H * D;

    int64_t ntiles = 0;
    for (int64_t b = 0; b < B; b++) ntiles += (cu_seqlens[b + 1] - cu_seqlens[b] + QB - 1) / QB;
    int64_t* tb = malloc((size_t)(ntiles + 1) * sizeof(int64_t));
    int64_t* ti0 = malloc((size_t)(ntiles + 1) * sizeof(int64_t));
    {
        int64_t n = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < cu_seqlens[b + 1] - cu_seqlens[b]; i += QB) {
                tb[n] = b;
                ti0[n] = i;
                n++;
            }
    }

#pragma omp parallel
    {
        float* s = malloc((size_t)QB * L * sizeof(float));
#pragma omp for schedule(dynamic, 1) collapse(2)
        for (int64_t t = 0; t < ntiles; t++) {
            for (int64_t h = 0; h < H; h++) {
                int64_t b = tb[t], i0 = ti0[t];
                int64_t len = cu_seqlens[b + 1] - cu_seqlens[b];
                int64_t i1 = i0 + QB < len ? i0 + QB : len;
                int64_t nq = i1 - i0;
                const int32_t* bt = block_table + b * MB;
                const float* qb = q + (cu_seqlens[b] + i0) * HD + h * D;
                float* ob = o + (cu_seqlens[b] + i0) * HD + h * D;

                /* scores: query i0+r attends keys 0..i0+r */
                for (int64_t j = 0; j < i1; j++) {
                    const float* kj = k_cache + ((int64_t)bt[j / BS] * BS + j % BS) * HD + h * D;
                    int64_t r0 = j > i0 ? j - i0 : 0;
                    for (int64_t r = r0; r < nq; r++) {
                        const float* qr = qb + r * HD;
                        float acc = 0.0f;
                        for (int64_t d = 0; d < D; d++) acc += qr[d] * kj[d];
                        s[r * L + j] = acc * scale;
                    }
                }
                /* softmax per query row */
                for (int64_t r = 0; r < nq; r++) {
                    float* sr = s + r * L;
                    int64_t n = i0 + r + 1;
                    float m = sr[0];
                    for (int64_t j = 1; j < n; j++) m = sr[j] > m ? sr[j] : m;
                    float sum = 0.0f;
                    for (int64_t j = 0; j < n; j++) {
                        sr[j] = expf(sr[j] - m);
                        sum += sr[j];
                    }
                    float inv = 1.0f / sum;
                    for (int64_t j = 0; j < n; j++) sr[j] *= inv;
                    float* orow = ob + r * HD;
                    for (int64_t d = 0; d < D; d++) orow[d] = 0.0f;
                }
                /* o = P V */
                for (int64_t j = 0; j < i1; j++) {
                    const float* vj = v_cache + ((int64_t)bt[j / BS] * BS + j % BS) * HD + h * D;
                    int64_t r0 = j > i0 ? j - i0 : 0;
                    for (int64_t r = r0; r < nq; r++) {
                        float p = s[r * L + j];
                        float* orow = ob + r * HD;
                        for (int64_t d = 0; d < D; d++) orow[d] += p * vj[d];
                    }
                }
            }
        }
        free(s);
    }
    free(tb);
    free(ti0);
}
