/* Seed: three passes, OpenMP over rows.
 * 1) gated projections a, b [N,N,Ch] (scratch);
 * 2) t[i,j,:] = sum_k a[i,k,:] * b[j,k,:], k blocked by BK, channel loop innermost;
 * 3) per (i,j): layernorm over Ch, project with wo, gate with sigmoid(z @ wog). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BK
#define BK 16
#endif

static inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

void triangle_multiplication(const float* z, const float* wa, const float* wag, const float* wb,
                             const float* wbg, const float* wo, const float* wog, float* out,
                             int64_t N, int64_t C, int64_t Ch) {
    const int64_t NN = N * N;
    float* a = (float*)malloc((size_t)(NN * Ch) * sizeof(float));
    float* b = (float*)malloc((size_t)(NN * Ch) * sizeof(float));
    float* t = (float*)calloc((size_t)(NN * Ch), sizeof(float));

#pragma omp parallel
    {
        float* pa = (float*)malloc((size_t)(4 * Ch) * sizeof(float));
        float* pag = pa + Ch;
        float* pb = pa + 2 * Ch;
        float* pbg = pa + 3 * Ch;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < NN; r++) {
            const float* zr = z + r * C;
            for (int64_t h = 0; h < Ch; h++) pa[h] = pag[h] = pb[h] = pbg[h] = 0.0f;
            for (int64_t c = 0; c < C; c++) {
                const float zc = zr[c];
                for (int64_t h = 0; h < Ch; h++) {
                    pa[h] += zc * wa[c * Ch + h];
                    pag[h] += zc * wag[c * Ch + h];
                    pb[h] += zc * wb[c * Ch + h];
                    pbg[h] += zc * wbg[c * Ch + h];
                }
            }
            for (int64_t h = 0; h < Ch; h++) {
                a[r * Ch + h] = sigm(pag[h]) * pa[h];
                b[r * Ch + h] = sigm(pbg[h]) * pb[h];
            }
        }
        free(pa);

#pragma omp for schedule(static)
        for (int64_t i = 0; i < N; i++) {
            for (int64_t k0 = 0; k0 < N; k0 += BK) {
                const int64_t k1 = k0 + BK < N ? k0 + BK : N;
                for (int64_t j = 0; j < N; j++) {
                    float* tr = t + (i * N + j) * Ch;
                    for (int64_t k = k0; k < k1; k++) {
                        const float* ar = a + (i * N + k) * Ch;
                        const float* br = b + (j * N + k) * Ch;
                        for (int64_t h = 0; h < Ch; h++) tr[h] += ar[h] * br[h];
                    }
                }
            }
        }

        float* g = (float*)malloc((size_t)C * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < NN; r++) {
            float* tr = t + r * Ch;
            const float* zr = z + r * C;
            float* o = out + r * C;
            float mu = 0.0f;
            for (int64_t h = 0; h < Ch; h++) mu += tr[h];
            mu /= (float)Ch;
            float var = 0.0f;
            for (int64_t h = 0; h < Ch; h++) var += (tr[h] - mu) * (tr[h] - mu);
            var /= (float)Ch;
            const float inv = 1.0f / sqrtf(var + 1e-5f);
            for (int64_t h = 0; h < Ch; h++) tr[h] = (tr[h] - mu) * inv;
            for (int64_t c = 0; c < C; c++) o[c] = 0.0f, g[c] = 0.0f;
            for (int64_t h = 0; h < Ch; h++)
                for (int64_t c = 0; c < C; c++) o[c] += tr[h] * wo[h * C + c];
            for (int64_t cc = 0; cc < C; cc++)
                for (int64_t c = 0; c < C; c++) g[c] += zr[cc] * wog[cc * C + c];
            for (int64_t c = 0; c < C; c++) o[c] *= sigm(g[c]);
        }
        free(g);
    }
    free(a);
    free(b);
    free(t);
}
