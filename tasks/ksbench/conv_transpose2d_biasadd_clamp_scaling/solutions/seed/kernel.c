/* Transposed conv (stride 2) by scatter-add: each output plane starts at the bias,
 * every input row is scattered into output rows 2*ih+kh at stride-2 columns, then
 * clamp and scale.  Parallel over (batch, out-channel block). */
#include <stdint.h>

#ifndef CO_BLK
#define CO_BLK 4
#endif

void conv_transpose2d_biasadd_clamp_scaling(const float* x, const float* w,
                                            const float* bias, float scale, float* y,
                                            int64_t B, int64_t CI, int64_t H, int64_t W,
                                            int64_t CO, int64_t K, int64_t OH, int64_t OW) {
    int64_t ncb = (CO + CO_BLK - 1) / CO_BLK;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++)
        for (int64_t blk = 0; blk < ncb; blk++) {
            int64_t co0 = blk * CO_BLK, co1 = co0 + CO_BLK < CO ? co0 + CO_BLK : CO;
            for (int64_t co = co0; co < co1; co++) {
                float* yp = y + (b * CO + co) * OH * OW;
                for (int64_t i = 0; i < OH * OW; i++) yp[i] = bias[co];
                for (int64_t ci = 0; ci < CI; ci++) {
                    const float* xp = x + (b * CI + ci) * H * W;
                    const float* wp = w + (ci * CO + co) * K * K;
                    for (int64_t ih = 0; ih < H; ih++) {
                        const float* xr = xp + ih * W;
                        for (int64_t kh = 0; kh < K; kh++) {
                            float* yr = yp + (2 * ih + kh) * OW;
                            for (int64_t kw = 0; kw < K; kw++) {
                                float wv = wp[kh * K + kw];
                                float* yc = yr + kw;
                                for (int64_t iw = 0; iw < W; iw++) yc[2 * iw] += wv * xr[iw];
                            }
                        }
                    }
                }
                for (int64_t i = 0; i < OH * OW; i++) {
                    float v = yp[i];
                    v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
                    yp[i] = v * scale;
                }
            }
        }
}
