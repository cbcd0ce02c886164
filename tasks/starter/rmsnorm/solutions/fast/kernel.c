/* RMSNorm: OpenMP over rows; per row one SIMD reduction pass (sum of squares,
 * OpenMP simd reduction = reassociated partial sums) and one SIMD scale pass. */
#include <math.h>
#include <stdint.h>

#ifndef CHUNK
#define CHUNK 8 /* rows per OpenMP scheduling chunk (tunable) */
#endif

void rmsnorm(const float* restrict x, const float* restrict w, float* restrict y,
             int64_t M, int64_t N) {
#pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t i = 0; i < M; i++) {
        const float* restrict xr = x + i * N;
        float* restrict yr = y + i * N;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int64_t j = 0; j < N; j++)
            ss += xr[j] * xr[j];
        float r = 1.0f / sqrtf(ss / (float)N + 1e-6f);
#pragma omp simd
        for (int64_t j = 0; j < N; j++)
            yr[j] = xr[j] * r * w[j];
    }
}
