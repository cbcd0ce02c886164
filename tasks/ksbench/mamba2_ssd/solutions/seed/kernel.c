/* Seed: the sequential recurrence.  OpenMP over (batch, head, tile of TP rows of the
 * P x N state); each task keeps its TP x N state slice in a local buffer and walks
 * the sequence once. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef TP
#define TP 16
#endif

void mamba2_ssd(const float* x, const float* dt, const float* A, const float* Bm, const float* Cm,
                float* y, int64_t B, int64_t S, int64_t H, int64_t P, int64_t N) {
    const int64_t ntiles = (P + TP - 1) / TP;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t task = 0; task < B * H * ntiles; task++) {
        const int64_t b = task / (H * ntiles);
        const int64_t h = (task / ntiles) % H;
        const int64_t p0 = (task % ntiles) * TP;
        const int64_t p1 = p0 + TP < P ? p0 + TP : P;
        float* st = (float*)calloc((size_t)(TP * N), sizeof(float));
        const float a = A[h];
        for (int64_t t = 0; t < S; t++) {
            const float d = dt[(b * S + t) * H + h];
            const float decay = expf(d * a);
            const float* xt = x + ((b * S + t) * H + h) * P;
            const float* bt = Bm + (b * S + t) * N;
            const float* ct = Cm + (b * S + t) * N;
            float* yt = y + ((b * S + t) * H + h) * P;
            for (int64_t p = p0; p < p1; p++) {
                float* sp = st + (p - p0) * N;
                const float dx = d * xt[p];
                float acc = 0.0f;
                for (int64_t n = 0; n < N; n++) {
                    sp[n] = decay * sp[n] + dx * bt[n];
                    acc += ct[n] * sp[n];
                }
                yt[p] = acc;
            }
        }
        free(st);
    }
}
