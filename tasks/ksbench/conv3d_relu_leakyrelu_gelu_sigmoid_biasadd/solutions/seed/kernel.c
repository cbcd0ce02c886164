/* Seed: direct conv3d (valid, stride 1).  Parallel over (batch, output-channel
 * block); each output row accumulates CI*K*K*K shifted input rows (inner loop over
 * ow vectorizes), then relu -> leaky_relu -> gelu -> sigmoid -> + bias. */
#include <math.h>
#include <stdint.h>

#ifndef CO_BLK
#define CO_BLK 2
#endif

void conv3d_relu_leakyrelu_gelu_sigmoid_biasadd(
    const float* x, const float* w, const float* conv_bias, const float* bias, float* y,
    int64_t B, int64_t CI, int64_t D, int64_t H, int64_t W, int64_t CO, int64_t K,
    int64_t OD, int64_t OH, int64_t OW) {
    int64_t ncb = (CO + CO_BLK - 1) / CO_BLK;
    int64_t KK = K * K * K;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++) {
        for (int64_t cb = 0; cb < ncb; cb++) {
            int64_t co0 = cb * CO_BLK;
            int64_t co1 = co0 + CO_BLK < CO ? co0 + CO_BLK : CO;
            for (int64_t co = co0; co < co1; co++) {
                for (int64_t od = 0; od < OD; od++) {
                    for (int64_t oh = 0; oh < OH; oh++) {
                        float* yr = y + (((b * CO + co) * OD + od) * OH + oh) * OW;
                        for (int64_t ow = 0; ow < OW; ow++) yr[ow] = conv_bias[co];
                        for (int64_t ci = 0; ci < CI; ci++) {
                            const float* wp = w + (co * CI + ci) * KK;
                            for (int64_t kd = 0; kd < K; kd++) {
                                for (int64_t kh = 0; kh < K; kh++) {
                                    const float* xr =
                                        x + (((b * CI + ci) * D + od + kd) * H + oh + kh) * W;
                                    for (int64_t kw = 0; kw < K; kw++) {
                                        float wv = wp[(kd * K + kh) * K + kw];
                                        for (int64_t ow = 0; ow < OW; ow++)
                                            yr[ow] += wv * xr[ow + kw];
                                    }
                                }
                            }
                        }
                        float bb = bias[co];
                        for (int64_t ow = 0; ow < OW; ow++) {
                            float v = yr[ow] > 0.0f ? yr[ow] : 0.0f;   /* relu */
                            v = v >= 0.0f ? v : 0.01f * v;             /* leaky relu */
                            v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
                            yr[ow] = 1.0f / (1.0f + expf(-v)) + bb;
                        }
                    }
                }
            }
        }
    }
}
