/* Seed: parallel over (batch, output-channel block); for each pooled row compute the
 * two conv rows it covers (CI*K*K shifted input rows each, inner loop over ow
 * vectorizes), apply subtract + hardswish, 2x2 max pool, then mish. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef CO_BLK
#define CO_BLK 4
#endif

static inline float mishf(float v) {
    float sp = fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v)));
    return v * tanhf(sp);
}

static inline float hswish(float v) {
    float t = v + 3.0f;
    t = t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
    return v * t / 6.0f;
}

static void conv_row(const float* x, const float* w, float bias, float* acc, int64_t b,
                     int64_t co, int64_t oh, int64_t CI, int64_t H, int64_t W, int64_t K,
                     int64_t OW) {
    for (int64_t ow = 0; ow < OW; ow++) acc[ow] = bias;
    for (int64_t ci = 0; ci < CI; ci++) {
        const float* xp = x + ((b * CI + ci) * H + oh) * W;
        const float* wp = w + (co * CI + ci) * K * K;
        for (int64_t kh = 0; kh < K; kh++) {
            const float* xr = xp + kh * W;
            for (int64_t kw = 0; kw < K; kw++) {
                float wv = wp[kh * K + kw];
                for (int64_t ow = 0; ow < OW; ow++) acc[ow] += wv * xr[ow + kw];
            }
        }
    }
}

void conv2d_subtract_hardswish_maxpool_mish(const float* x, const float* w,
                                            const float* conv_bias, float sub, float* y,
                                            int64_t B, int64_t CI, int64_t H, int64_t W,
                                            int64_t CO, int64_t K, int64_t OH, int64_t OW,
                                            int64_t PH, int64_t PW) {
    (void)OH;
    int64_t ncb = (CO + CO_BLK - 1) / CO_BLK;
#pragma omp parallel
    {
        float* r0 = malloc(sizeof(float) * OW);
        float* r1 = malloc(sizeof(float) * OW);
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t b = 0; b < B; b++) {
            for (int64_t cb = 0; cb < ncb; cb++) {
                int64_t co0 = cb * CO_BLK;
                int64_t co1 = co0 + CO_BLK < CO ? co0 + CO_BLK : CO;
                for (int64_t co = co0; co < co1; co++) {
                    float bias = conv_bias[co] - sub;
                    for (int64_t ph = 0; ph < PH; ph++) {
                        conv_row(x, w, bias, r0, b, co, 2 * ph, CI, H, W, K, OW);
                        conv_row(x, w, bias, r1, b, co, 2 * ph + 1, CI, H, W, K, OW);
                        float* yr = y + ((b * CO + co) * PH + ph) * PW;
                        for (int64_t pw = 0; pw < PW; pw++) {
                            float m = hswish(r0[2 * pw]);
                            float v = hswish(r0[2 * pw + 1]);
                            m = v > m ? v : m;
                            v = hswish(r1[2 * pw]);
                            m = v > m ? v : m;
                            v = hswish(r1[2 * pw + 1]);
                            m = v > m ? v : m;
                            yr[pw] = mishf(m);
                        }
                    }
                }
            }
        }
        free(r0);
        free(r1);
    }
}
