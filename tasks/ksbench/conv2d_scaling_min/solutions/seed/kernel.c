/* Seed: per batch item, each output channel is convolved into a scratch plane
 * (ROWS output rows at a time), scaled and folded into the running channel min. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef ROWS
#define ROWS 4
#endif

void conv2d_scaling_min(const float* x, const float* w, const float* cb, float scale,
                        float* y, int64_t B, int64_t CI, int64_t H, int64_t W, int64_t CO,
                        int64_t HO, int64_t WO, int64_t K, int64_t U) {
    (void)U;
#pragma omp parallel
    {
        float* plane = malloc(sizeof(float) * HO * WO);
#pragma omp for schedule(static)
        for (int64_t b = 0; b < B; b++) {
            float* yp = y + b * HO * WO;
            for (int64_t i = 0; i < HO * WO; i++) yp[i] = INFINITY;
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
                for (int64_t i = 0; i < HO * WO; i++) {
                    float v = plane[i] * scale;
                    yp[i] = v < yp[i] ? v : yp[i];
                }
            }
        }
        free(plane);
    }
}
