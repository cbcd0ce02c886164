/* 1) direct conv2d (+bias) into a scratch tensor, parallel over (batch, co block);
 * 2) GroupNorm stats per (batch, group), two-pass;
 * 3) per (batch, output row): r = c + hardswish(tanh(norm(c))) for every channel into
 *    a row buffer, then logsumexp over channels (inner loops over ow vectorize). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef CO_BLK
#define CO_BLK 4
#endif

void conv2d_groupnorm_tanh_hardswish_residualadd_logsumexp(
    const float* x, const float* w, const float* cb, const float* gamma, const float* beta,
    float* y, int64_t B, int64_t CI, int64_t H, int64_t W, int64_t CO, int64_t K, int64_t G,
    int64_t ONE, int64_t OH, int64_t OW) {
    (void)ONE;
    int64_t S = OH * OW;
    float* c = malloc(sizeof(float) * B * CO * S);
    float* mean = malloc(sizeof(float) * B * G);
    float* rstd = malloc(sizeof(float) * B * G);
    int64_t ncb = (CO + CO_BLK - 1) / CO_BLK;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++)
        for (int64_t blk = 0; blk < ncb; blk++) {
            int64_t co0 = blk * CO_BLK, co1 = co0 + CO_BLK < CO ? co0 + CO_BLK : CO;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t co = co0; co < co1; co++) {
                    float* cr = c + ((b * CO + co) * OH + oh) * OW;
                    for (int64_t ow = 0; ow < OW; ow++) cr[ow] = cb[co];
                    for (int64_t ci = 0; ci < CI; ci++) {
                        const float* xp = x + ((b * CI + ci) * H + oh) * W;
                        const float* wp = w + (co * CI + ci) * K * K;
                        for (int64_t kh = 0; kh < K; kh++)
                            for (int64_t kw = 0; kw < K; kw++) {
                                float wv = wp[kh * K + kw];
                                const float* xr = xp + kh * W + kw;
                                for (int64_t ow = 0; ow < OW; ow++) cr[ow] += wv * xr[ow];
                            }
                    }
                }
        }
    int64_t cpg = CO / G, gsz = cpg * S;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t g = 0; g < G; g++) {
            const float* cg = c + (b * CO + g * cpg) * S;
            float s = 0.0f;
            for (int64_t i = 0; i < gsz; i++) s += cg[i];
            float mu = s / (float)gsz;
            float v = 0.0f;
            for (int64_t i = 0; i < gsz; i++) {
                float d = cg[i] - mu;
                v += d * d;
            }
            mean[b * G + g] = mu;
            rstd[b * G + g] = 1.0f / sqrtf(v / (float)gsz + 1e-5f);
        }
#pragma omp parallel
    {
        float* r = malloc(sizeof(float) * CO * OW);
        float* m = malloc(sizeof(float) * OW);
        float* s = malloc(sizeof(float) * OW);
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t oh = 0; oh < OH; oh++) {
                for (int64_t ow = 0; ow < OW; ow++) {
                    m[ow] = -INFINITY;
                    s[ow] = 0.0f;
                }
                for (int64_t co = 0; co < CO; co++) {
                    int64_t g = co / cpg;
                    float mu = mean[b * G + g], is = rstd[b * G + g];
                    float ga = gamma[co], be = beta[co];
                    const float* cr = c + ((b * CO + co) * OH + oh) * OW;
                    float* rr = r + co * OW;
                    for (int64_t ow = 0; ow < OW; ow++) {
                        float t = tanhf((cr[ow] - mu) * is * ga + be);
                        float u = t + 3.0f;
                        u = u < 0.0f ? 0.0f : (u > 6.0f ? 6.0f : u);
                        float v = cr[ow] + t * u * (1.0f / 6.0f);
                        rr[ow] = v;
                        m[ow] = v > m[ow] ? v : m[ow];
                    }
                }
                for (int64_t co = 0; co < CO; co++)
                    for (int64_t ow = 0; ow < OW; ow++) s[ow] += expf(r[co * OW + ow] - m[ow]);
                float* yr = y + (b * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = m[ow] + logf(s[ow]);
            }
        free(r);
        free(m);
        free(s);
    }
    free(c);
    free(mean);
    free(rstd);
}
