// task: softmax; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Data race: per row, two OpenMP threads each sum half of the exps and then add their
 * part to one shared variable with a plain read-modify-write (no reduction clause, no
 * atomics).  A barrier between the read and the write makes the lost update certain:
 * both threads read the sum before either writes it, so one half is lost on every row,
 * whatever the machine's load (the test must not depend on the threads happening to
 * overlap). */
#include <math.h>
#include <omp.h>
#include <stdint.h>

void softmax(const float* x, float* y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float m = xr[0];
        for (int64_t j = 1; j < N; j++)
            m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
#pragma omp parallel num_threads(2)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            float part = 0.0f;
            for (int64_t j = t; j < N; j += nt) {
                float e = expf(xr[j] - m);
                yr[j] = e;
                part += e;
            }
            float acc = s; /* racy read of the shared sum ... */
#pragma omp barrier
            s = acc + part; /* ... and racy write: the other thread's part is lost */
        }
        for (int64_t j = 0; j < N; j++)
            yr[j] /= s;
    }
}
