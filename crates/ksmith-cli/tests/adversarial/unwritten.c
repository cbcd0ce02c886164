// task: rmsnorm; expect: INCORRECT_NUMERICAL output_unwritten
/* Correct RMSNorm for rows 0 .. M-2; the last row of y is never written. */
#include <math.h>
#include <stdint.h>

void rmsnorm(const float* x, const float* w, float* y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M - 1; i++) { /* skips row M-1 entirely */
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float ss = 0.0f;
        for (int64_t j = 0; j < N; j++)
            ss += xr[j] * xr[j];
        float r = 1.0f / sqrtf(ss / (float)N + 1e-6f);
        for (int64_t j = 0; j < N; j++)
            yr[j] = xr[j] * r * w[j];
    }
}
