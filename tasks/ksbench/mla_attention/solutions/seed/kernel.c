/* Seed: MLA.  Phase 1 materializes K and V [B,H,S,D] from the latent c with the
 * up-projections (OpenMP over (b, s); l-outer loop so the weight rows stream).
 * Phase 2 is plain causal attention, one query row at a time, OpenMP over
 * (b, h, query block of BQ rows). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BQ
#define BQ 16
#endif

void mla_attention(const float* c, const float* wk, const float* wv, const float* q, float* o,
                   int64_t B, int64_t H, int64_t S, int64_t L, int64_t D) {
    const int64_t HD = H * D;
    float* K = (float*)malloc(sizeof(float) * B * H * S * D);
    float* V = (float*)malloc(sizeof(float) * B * H * S * D);
    const float scale = 1.0f / sqrtf((float)D);

#pragma omp parallel
    {
        float* kr = (float*)malloc(sizeof(float) * HD);
        float* vr = (float*)malloc(sizeof(float) * HD);
#pragma omp for schedule(static)
        for (int64_t bs = 0; bs < B * S; bs++) {
            const int64_t b = bs / S, s = bs % S;
            const float* cr = c + bs * L;
            memset(kr, 0, sizeof(float) * HD);
            memset(vr, 0, sizeof(float) * HD);
            for (int64_t l = 0; l < L; l++) {
                const float cl = cr[l];
                const float* wkl = wk + l * HD;
                const float* wvl = wv + l * HD;
                for (int64_t x = 0; x < HD; x++) {
                    kr[x] += cl * wkl[x];
                    vr[x] += cl * wvl[x];
                }
            }
            for (int64_t h = 0; h < H; h++) {
                memcpy(K + ((b * H + h) * S + s) * D, kr + h * D, sizeof(float) * D);
                memcpy(V + ((b * H + h) * S + s) * D, vr + h * D, sizeof(float) * D);
            }
        }
        free(kr);
        free(vr);

        float* p = (float*)malloc(sizeof(float) * S);
        const int64_t nqb = (S + BQ - 1) / BQ;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < B * H * nqb; t++) {
            const int64_t bh = t / nqb, qb = t % nqb;
            const float* qh = q + bh * S * D;
            const float* kh = K + bh * S * D;
            const float* vh = V + bh * S * D;
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
    free(K);
    free(V);
}
