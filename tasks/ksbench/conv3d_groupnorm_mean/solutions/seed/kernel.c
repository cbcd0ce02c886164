/* Direct conv3d (valid, stride 1) into a scratch volume, then per-sample GroupNorm
 * statistics (two-pass) and the mean of the affine-normalized values.  Conv is
 * parallel over (sample, out-channel); the inner loop over ow vectorizes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef CHUNK
#define CHUNK 2
#endif

void conv3d_groupnorm_mean(const float* x, const float* w, const float* bias,
                           const float* gamma, const float* beta, float* y, int64_t B,
                           int64_t CI, int64_t D, int64_t H, int64_t W, int64_t CO,
                           int64_t K, int64_t G, int64_t OD, int64_t OH, int64_t OW) {
    int64_t S = OD * OH * OW;
    float* c = malloc(sizeof(float) * B * CO * S);
#pragma omp parallel for collapse(2) schedule(dynamic, CHUNK)
    for (int64_t b = 0; b < B; b++) {
        for (int64_t co = 0; co < CO; co++) {
            float* cc = c + (b * CO + co) * S;
            for (int64_t s = 0; s < S; s++) cc[s] = bias[co];
            for (int64_t ci = 0; ci < CI; ci++) {
                const float* xv = x + (b * CI + ci) * D * H * W;
                const float* wv = w + (co * CI + ci) * K * K * K;
                for (int64_t od = 0; od < OD; od++)
                    for (int64_t oh = 0; oh < OH; oh++) {
                        float* cr = cc + (od * OH + oh) * OW;
                        for (int64_t kd = 0; kd < K; kd++)
                            for (int64_t kh = 0; kh < K; kh++) {
                                const float* xr = xv + ((od + kd) * H + oh + kh) * W;
                                for (int64_t kw = 0; kw < K; kw++) {
                                    float wt = wv[(kd * K + kh) * K + kw];
                                    for (int64_t ow = 0; ow < OW; ow++) cr[ow] += wt * xr[ow + kw];
                                }
                            }
                    }
            }
        }
    }
    int64_t cpg = CO / G, gsz = cpg * S;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        double total = 0.0;
        for (int64_t g = 0; g < G; g++) {
            const float* cg = c + (b * CO + g * cpg) * S;
            float s = 0.0f;
            for (int64_t i = 0; i < gsz; i++) s += cg[i];
            float mean = s / (float)gsz;
            float v = 0.0f;
            for (int64_t i = 0; i < gsz; i++) {
                float d = cg[i] - mean;
                v += d * d;
            }
            float inv = 1.0f / sqrtf(v / (float)gsz + 1e-5f);
            for (int64_t j = 0; j < cpg; j++) {
                const float* ch = cg + j * S;
                float cs = 0.0f;
                for (int64_t i = 0; i < S; i++) cs += ch[i] - mean;
                int64_t co = g * cpg + j;
                total += gamma[co] * (cs * inv) + beta[co] * (float)S;
            }
        }
        y[b] = (float)(total / (double)(CO * S));
    }
    free(c);
}
