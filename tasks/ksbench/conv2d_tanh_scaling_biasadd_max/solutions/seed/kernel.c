/* Direct conv2d (valid, stride 1) computed two output rows at a time into row buffers,
 * then tanh/scale/bias and the 2x2 max pool.  Parallel over (batch, out-channel block). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef CO_BLK
#define CO_BLK 4
#endif

void conv2d_tanh_scaling_biasadd_max(const float* x, const float* w, const float* cb,
                                     float scale, const float* bias, float* y, int64_t B,
                                     int64_t CI, int64_t H, int64_t W, int64_t CO,
                                     int64_t K, int64_t PH, int64_t PW) {
    int64_t OW = W - K + 1;
    int64_t ncb = (CO + CO_BLK - 1) / CO_BLK;
#pragma omp parallel
    {
        float* rows = malloc(sizeof(float) * 2 * OW);
#pragma omp for collapse(2) schedule(dynamic)
        for (int64_t b = 0; b < B; b++) {
            for (int64_t blk = 0; blk < ncb; blk++) {
                int64_t co0 = blk * CO_BLK;
                int64_t co1 = co0 + CO_BLK < CO ? co0 + CO_BLK : CO;
                for (int64_t co = co0; co < co1; co++) {
                    for (int64_t ph = 0; ph < PH; ph++) {
                        for (int64_t rr = 0; rr < 2; rr++) {
                            int64_t oh = 2 * ph + rr;
                            float* yr = rows + rr * OW;
                            for (int64_t ow = 0; ow < OW; ow++) yr[ow] = cb[co];
                            for (int64_t ci = 0; ci < CI; ci++) {
                                const float* xp = x + ((b * CI + ci) * H + oh) * W;
                                const float* wp = w + (co * CI + ci) * K * K;
                                for (int64_t kh = 0; kh < K; kh++)
                                    for (int64_t kw = 0; kw < K; kw++) {
                                        float wv = wp[kh * K + kw];
                                        const float* xr = xp + kh * W + kw;
                                        for (int64_t ow = 0; ow < OW; ow++) yr[ow] += wv * xr[ow];
                                    }
                            }
                            for (int64_t ow = 0; ow < 2 * PW; ow++)
                                yr[ow] = tanhf(yr[ow]) * scale + bias[co];
                        }
                        float* out = y + ((b * CO + co) * PH + ph) * PW;
                        for (int64_t pw = 0; pw < PW; pw++) {
                            float m = rows[2 * pw];
                            m = rows[2 * pw + 1] > m ? rows[2 * pw + 1] : m;
                            m = rows[OW + 2 * pw] > m ? rows[OW + 2 * pw] : m;
                            m = rows[OW + 2 * pw + 1] > m ? rows[OW + 2 * pw + 1] : m;
                            out[pw] = m;
                        }
                    }
                }
            }
        }
        free(rows);
    }
}
