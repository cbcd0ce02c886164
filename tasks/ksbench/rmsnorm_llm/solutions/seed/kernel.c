/* Seed RMSNorm: one row per iteration, rows in parallel.  Sum of squares in
 * double (cheap insurance against the outlier channels), then one scaling pass. */
#include <math.h>
#include <stdint.h>

#ifndef CHUNK
#define CHUNK 4
#endif

void rmsnorm_llm(const float* x, const float* w, float* y, int64_t M, int64_t N) {
#pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        double ss = 0.0;
        for (int64_t j = 0; j < N; j++) ss += (double)xr[j] * xr[j];
        float r = (float)(1.0 / sqrt(ss / (double)N + 1e-6));
        for (int64_t j = 0; j < N; j++) yr[j] = xr[j] * r * w[j];
    }
}
