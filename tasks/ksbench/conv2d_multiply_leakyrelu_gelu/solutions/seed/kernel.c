/* Seed: direct convolution per (b, co) plane (ROWS output rows at a time), then
 * the multiplier, leaky ReLU and erf GELU applied in place. */
#include <math.h>
#include <stdint.h>

#ifndef ROWS
#define ROWS 4
#endif

void conv2d_multiply_leakyrelu_gelu(const float* x, const float* w, const float* cb,
                                    const float* mult, float* y, int64_t B, int64_t CI,
                                    int64_t H, int64_t W, int64_t CO, int64_t HO, int64_t WO,
                                    int64_t K) {
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
            float m = mult[co];
            for (int64_t i = 0; i < HO * WO; i++) {
                float h = yp[i] * m;
                h = h >= 0.0f ? h : 0.01f * h;
                yp[i] = 0.5f * h * (1.0f + erff(h * 0.70710678118654752f));
            }
        }
    }
}
