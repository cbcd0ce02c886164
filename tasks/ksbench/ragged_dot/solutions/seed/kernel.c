/* Seed: group offsets by prefix sum; OpenMP over rows; per row an i-k-j loop
 * (out row += lhs[m,k] * rhs[g,k,:]) blocked over K by BK. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BK
#define BK 64
#endif

void ragged_dot(const float* lhs, const float* rhs, const int32_t* group_sizes, float* out,
                int64_t M, int64_t K, int64_t N, int64_t G) {
    int64_t* start = (int64_t*)malloc((size_t)(G + 1) * sizeof(int64_t));
    start[0] = 0;
    for (int64_t g = 0; g < G; g++) start[g + 1] = start[g] + group_sizes[g];
    /* rows past the last group (if sizes sum < M) are zero, as in ragged_dot */
    memset(out, 0, (size_t)(M * N) * sizeof(float));
    for (int64_t g = 0; g < G; g++) {
        int64_t r0 = start[g], r1 = start[g + 1] < M ? start[g + 1] : M;
        const float* W = rhs + g * K * N;
#pragma omp parallel for schedule(static)
        for (int64_t m = r0; m < r1; m++) {
            float* o = out + m * N;
            const float* a = lhs + m * K;
            for (int64_t k0 = 0; k0 < K; k0 += BK) {
                int64_t k1 = k0 + BK < K ? k0 + BK : K;
                for (int64_t k = k0; k < k1; k++) {
                    float av = a[k];
                    const float* w = W + k * N;
                    for (int64_t n = 0; n < N; n++) o[n] += av * w[n];
                }
            }
        }
    }
    free(start);
}
