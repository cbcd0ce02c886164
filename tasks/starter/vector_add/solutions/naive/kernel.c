#include <stdint.h>

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
}
