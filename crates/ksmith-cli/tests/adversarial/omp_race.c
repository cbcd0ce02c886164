// task: softmax; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Data race: per row, the exp-sum is accumulated by two OpenMP threads into one
 * shared variable with a plain `+=` (no reduction clause, no atomics).  Each
 * update is a separate load-add-store (y may alias s, so it cannot be kept in a
 * register), interleaved with an expf and a store, so concurrent updates are
 * lost and the row sums come out too small. */
#include <math.h>
#include <stdint.h>

void softmax(const float* x, float* y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float m = xr[0];
        for (int64_t j = 1; j < N; j++)
            m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
#pragma omp parallel for num_threads(2) schedule(static, 1)
        for (int64_t j = 0; j < N; j++) {
            float e = expf(xr[j] - m);
            yr[j] = e;
            s += e; /* racy read-modify-write of a shared variable */
        }
        for (int64_t j = 0; j < N; j++)
            yr[j] /= s;
    }
}
