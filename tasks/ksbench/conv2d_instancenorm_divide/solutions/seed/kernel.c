/* Seed: direct convolution per (b, co) plane, then a two-pass instance norm
 * over the plane, fused with the division.  ROWS output rows are accumulated
 * together so each weight is reloaded fewer times. */
#include <math.h>
#include <stdint.h>

#ifndef ROWS
#define ROWS 4
#endif

void conv2d_instancenorm_divide(const float* x, const float* w, const float* cb, float div,
                                float* y, int64_t B, int64_t CI, int64_t H, int64_t W,
                                int64_t CO, int64_t HO, int64_t WO, int64_t K) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++) {
        for (int64_t co = 0; co < CO; co++) {
            float* yp = y + (b * CO + co) * HO * WO;
            for (int64_t i = 0; i < HO * WO; i++) yp[i] = cb[co];
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
                                float* yr = yp + oh * WO;
                                for (int64_t ow = 0; ow < WO; ow++) yr[ow] += wv * xr[ow];
                            }
                        }
                }
            }
            int64_t n = HO * WO;
            double s = 0.0;
            for (int64_t i = 0; i < n; i++) s += yp[i];
            float mean = (float)(s / n);
            double ss = 0.0;
            for (int64_t i = 0; i < n; i++) {
                float d = yp[i] - mean;
                ss += (double)d * d;
            }
            float var = (float)(ss / n);
            float scale = 1.0f / (sqrtf(var + 1e-5f) * div);
            for (int64_t i = 0; i < n; i++) yp[i] = (yp[i] - mean) * scale;
        }
    }
}
