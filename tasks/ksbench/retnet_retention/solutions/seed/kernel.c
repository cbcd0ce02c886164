/* Seed: OpenMP over (b, h, i); for each query row, scores for a block of BJ key rows
 * are computed (dot * gamma^(i-j) * scale) into a small buffer, then accumulated
 * into the output row. */
#include <math.h>
#include <stdint.h>

#ifndef BJ
#define BJ 64
#endif

void retnet_retention(const float* q, const float* k, const float* v, const float* gamma,
                      float* out, int64_t B, int64_t H, int64_t S, int64_t D) {
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(dynamic, 16)
    for (int64_t bh = 0; bh < B * H; bh++) {
        for (int64_t i = 0; i < S; i++) {
            const int64_t h = bh % H;
            const float g = gamma[h];
            const float* Q = q + bh * S * D;
            const float* Kp = k + bh * S * D;
            const float* V = v + bh * S * D;
            float* o = out + (bh * S + i) * D;
            const float* qi = Q + i * D;
            float w[BJ];
            for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
            for (int64_t j0 = 0; j0 <= i; j0 += BJ) {
                int64_t j1 = j0 + BJ <= i + 1 ? j0 + BJ : i + 1;
                for (int64_t j = j0; j < j1; j++) {
                    const float* kj = Kp + j * D;
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; d++) s += qi[d] * kj[d];
                    w[j - j0] = s * scale * powf(g, (float)(i - j));
                }
                for (int64_t j = j0; j < j1; j++) {
                    const float* vj = V + j * D;
                    float wj = w[j - j0];
                    for (int64_t d = 0; d < D; d++) o[d] += wj * vj[d];
                }
            }
        }
    }
}
