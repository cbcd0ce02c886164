/* LayerNorm: OpenMP over rows; per row a SIMD mean pass, a SIMD centered
 * variance pass (two-pass: no E[x^2]-mu^2 cancellation; the row is in L1/L2),
 * and a SIMD affine pass. */
#include <math.h>
#include <stdint.h>

#ifndef CHUNK
#define CHUNK 8 /* rows per OpenMP scheduling chunk (tunable) */
#endif

void layernorm(const float* restrict x, const float* restrict gamma,
               const float* restrict beta, float* restrict y, int64_t M, int64_t N) {
#pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t i = 0; i < M; i++) {
        const float* restrict xr = x + i * N;
        float* restrict yr = y + i * N;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < N; j++)
            s += xr[j];
        float mu = s / (float)N;
        float v = 0.0f;
#pragma omp simd reduction(+ : v)
        for (int64_t j = 0; j < N; j++) {
            float d = xr[j] - mu;
            v += d * d;
        }
        float r = 1.0f / sqrtf(v / (float)N + 1e-5f);
#pragma omp simd
        for (int64_t j = 0; j < N; j++)
            yr[j] = (xr[j] - mu) * r * gamma[j] + beta[j];
    }
}
