// task: softmax; expect: INCORRECT_NUMERICAL degenerate_output
/* Writes 0.0f to every output element and never looks at the input. */
#include <stdint.h>

void softmax(const float* x, float* y, int64_t M, int64_t N) {
    (void)x;
    for (int64_t i = 0; i < M * N; i++)
        y[i] = 0.0f;
}
