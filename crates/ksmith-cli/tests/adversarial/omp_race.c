// task: softmax; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Data race: per row, the exp-sum is accumulated by two OpenMP threads into one
 * shared variable without a reduction clause or atomics: each iteration reads
 * s, calls expf, and writes s back.  (gcc -O3 even forwards each thread's own
 * last write to its next read, so each thread keeps overwriting s with its own
 * running total, which is legal for racy code.)  Whenever the two threads really
 * run at the same time, updates are lost and the row sums come out wrong; rows
 * whose two halves happen to run one after the other come out right. */
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
            float acc = s;            /* racy read of the shared sum ... */
            float e = expf(xr[j] - m);
            yr[j] = e;
            s = acc + e;              /* ... and racy write: concurrent updates are lost */
        }
        for (int64_t j = 0; j < N; j++)
            yr[j] /= s;
    }
}
