#include <stdint.h>

void gemv_bias_relu(const float* A, const float* x, const float* bias, float* y, int64_t M, int64_t K) {
    for (int64_t i = 0; i < M; i++) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; k++)
            acc += A[i * K + k] * x[k];
        acc += bias[i];
        y[i] = acc > 0.0f ? acc : 0.0f;
    }
}
