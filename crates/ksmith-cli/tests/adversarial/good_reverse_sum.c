// task: softmax; expect: PASSED
/* Correct softmax whose max and exp-sum run over each row in reverse order (a
 * plain sequential float sum: a different rounding order than XLA's tree sum). */
#include <math.h>
#include <stdint.h>

void softmax(const float* x, float* y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float* xr = x + i * N;
        float* yr = y + i * N;
        float m = xr[N - 1];
        for (int64_t j = N - 2; j >= 0; j--)
            m = xr[j] > m ? xr[j] : m;
        float s = 0.0f;
        for (int64_t j = N - 1; j >= 0; j--) {
            yr[j] = expf(xr[j] - m);
            s += yr[j];
        }
        float inv = 1.0f / s;
        for (int64_t j = 0; j < N; j++)
            yr[j] *= inv;
    }
}
