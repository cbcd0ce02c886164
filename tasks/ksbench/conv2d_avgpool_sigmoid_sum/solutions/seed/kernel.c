/* Seed: per (b, co) plane, direct convolution into a scratch plane (ROWS output
 * rows at a time), then 2x2 average pooling, sigmoid and a double-precision
 * partial sum; the per-plane partials are added per batch item at the end. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef ROWS
#define ROWS 4
#endif

void conv2d_avgpool_sigmoid_sum(const float* x, const float* w, const float* cb, float* y,
                                int64_t B, int64_t CI, int64_t H, int64_t W, int64_t CO,
                                int64_t PH, int64_t PW, int64_t K) {
    int64_t HO = H - K + 1, WO = W - K + 1;
    double* part = malloc(sizeof(double) * B * CO);
#pragma omp parallel
    {
        float* plane = malloc(sizeof(float) * HO * WO);
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++) {
            for (int64_t co = 0; co < CO; co++) {
                for (int64_t i = 0; i < HO * WO; i++) plane[i] = cb[co];
                for (int64_t oh0 = 0; oh0 < HO; oh0 += ROWS) {
                    int64_t oh1 = oh0 + ROWS < HO ? oh0 + ROWS : HO;
                    for (int64_t ci = 0; ci < CI; ci++) {
                        const float* xp = x + (b * CI + ci) * H * W;
                        const float* wp = w + (co * CI + ci) * K * K;
                        for (int64_t kh = 0; kh < K; kh++)
                            for (int64_t kw = 0; kw < K; kw++) {
                                float wv = wp[kh * K + kw];
                                for (int64_t oh = oh0; oh < oh1; oh++) {
                                    const float* xr = xp + (oh + kh) * W + kw;
                                    float* pr = plane + oh * WO;
                                    for (int64_t ow = 0; ow < WO; ow++) pr[ow] += wv * xr[ow];
                                }
                            }
                    }
                }
                double s = 0.0;
                for (int64_t i = 0; i < PH; i++)
                    for (int64_t j = 0; j < PW; j++) {
                        const float* p = plane + 2 * i * WO + 2 * j;
                        float a = 0.25f * (p[0] + p[1] + p[WO] + p[WO + 1]);
                        s += 1.0f / (1.0f + expf(-a));
                    }
                part[b * CO + co] = s;
            }
        }
        free(plane);
    }
    for (int64_t b = 0; b < B; b++) {
        double s = 0.0;
        for (int64_t co = 0; co < CO; co++) s += part[b * CO + co];
        y[b] = (float)s;
    }
    free(part);
}
