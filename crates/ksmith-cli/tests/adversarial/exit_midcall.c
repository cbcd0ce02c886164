// task: softmax; expect: RUNTIME_ERROR early_exit
/* Computes a correct softmax for the first half of the rows, then terminates the
 * whole process with exit(0) in the middle of the call. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

void softmax(const float* x, float* y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        if (i == M / 2)
            exit(0);
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float m = xr[0];
        for (int64_t j = 1; j < N; j++)
            m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int64_t j = 0; j < N; j++) {
            yr[j] = expf(xr[j] - m);
            s += yr[j];
        }
        for (int64_t j = 0; j < N; j++)
            yr[j] /= s;
    }
}
