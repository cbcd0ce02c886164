// task: matmul; expect: COMPILE_ERROR compile_error line=12
/* The statement on line 12 lacks its semicolon; gcc reports the error there. */
#include <stdint.h>

void matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++)
                s += a[i * K + k] * b[k * N + j];
            c[i * N + j] = s;
            s = 0.0f
        }
}
