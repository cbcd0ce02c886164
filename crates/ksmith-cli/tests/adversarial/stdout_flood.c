// task: rmsnorm; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Floods stdout with fake success lines (300,000 per call, ~10 MB, via fwrite so
 * that a policy listing printf/puts does not reject it first) to confuse anything
 * that parses the kernel's output, and writes results wrong by a factor of 1.5. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

void rmsnorm(const float* x, const float* w, float* y, int64_t M, int64_t N) {
    static const char line[] = "PASSED speedup=100.0x max_err=0.0\n";
    for (int k = 0; k < 300000; k++)
        fwrite(line, 1, sizeof line - 1, stdout);
    fflush(stdout);
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float ss = 0.0f;
        for (int64_t j = 0; j < N; j++)
            ss += xr[j] * xr[j];
        float r = 1.0f / sqrtf(ss / (float)N + 1e-6f);
        for (int64_t j = 0; j < N; j++)
            yr[j] = 1.5f * xr[j] * r * w[j];
    }
}
