// task: layernorm; expect: INCORRECT_NUMERICAL nan_in_output
/* Correct LayerNorm, except every 7th element (flat index % 7 == 0) is NaN. */
#include <math.h>
#include <stdint.h>

void layernorm(const float* x, const float* gamma, const float* beta, float* y,
               int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float s = 0.0f;
        for (int64_t j = 0; j < N; j++)
            s += xr[j];
        float mu = s / (float)N;
        float v = 0.0f;
        for (int64_t j = 0; j < N; j++)
            v += (xr[j] - mu) * (xr[j] - mu);
        float r = 1.0f / sqrtf(v / (float)N + 1e-5f);
        for (int64_t j = 0; j < N; j++)
            yr[j] = (xr[j] - mu) * r * gamma[j] + beta[j];
    }
    for (int64_t k = 0; k < M * N; k += 7)
        y[k] = NAN;
}
