// task: softmax; expect: INCORRECT_NUMERICAL numerical_mismatch
/* Overfits the first (smallest) workload: the row length of its reductions is the
 * compile-time constant FIRST_N = 600, the N of the FIRST [[workloads]] entry in
 * tasks/starter/softmax/task.toml (M = 2000, N = 600).  The max and the sum only
 * look at the first min(FIRST_N, N) elements of each row, while every element of
 * every row is still written using the real N.  Correct when N <= 600, wrong for
 * the other workloads (N = 32000, 2000, 777). */
#include <math.h>
#include <stdint.h>

#define FIRST_N 600

void softmax(const float* x, float* y, int64_t M, int64_t N) {
    int64_t nr = N < FIRST_N ? N : FIRST_N;
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float m = xr[0];
        for (int64_t j = 1; j < nr; j++)
            m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int64_t j = 0; j < nr; j++)
            s += expf(xr[j] - m);
        for (int64_t j = 0; j < N; j++)
            yr[j] = expf(xr[j] - m) / s;
    }
}
