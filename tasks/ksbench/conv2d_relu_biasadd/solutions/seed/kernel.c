/* Direct conv2d (valid, stride 1) + bias, relu, + bias2.  Parallel over (batch,
 * output-channel block); for each output row accumulate CI*K*K shifted input rows
 * into a row buffer (inner loop over ow vectorizes). */
#include <stdint.h>
#include <stdlib.h>

#ifndef CO_BLK
#define CO_BLK 4
#endif

void conv2d_relu_biasadd(const float* x, const float* w, const float* conv_bias,
                         const float* bias2, float* y, int64_t B, int64_t CI, int64_t H,
                         int64_t W, int64_t CO, int64_t K, int64_t OH, int64_t OW) {
    int64_t ncb = (CO + CO_BLK - 1) / CO_BLK;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++) {
        for (int64_t cb = 0; cb < ncb; cb++) {
            int64_t co0 = cb * CO_BLK;
            int64_t co1 = co0 + CO_BLK < CO ? co0 + CO_BLK : CO;
            for (int64_t oh = 0; oh < OH; oh++) {
                for (int64_t co = co0; co < co1; co++) {
                    float* yr = y + ((b * CO + co) * OH + oh) * OW;
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = conv_bias[co];
                    for (int64_t ci = 0; ci < CI; ci++) {
                        const float* xp = x + ((b * CI + ci) * H + oh) * W;
                        const float* wp = w + (co * CI + ci) * K * K;
                        for (int64_t kh = 0; kh < K; kh++) {
                            const float* xr = xp + kh * W;
                            for (int64_t kw = 0; kw < K; kw++) {
                                float wv = wp[kh * K + kw];
                                for (int64_t ow = 0; ow < OW; ow++) yr[ow] += wv * xr[ow + kw];
                            }
                        }
                    }
                    float b2 = bias2[co];
                    for (int64_t ow = 0; ow < OW; ow++)
                        yr[ow] = (yr[ow] > 0.0f ? yr[ow] : 0.0f) + b2;
                }
            }
        }
    }
}
