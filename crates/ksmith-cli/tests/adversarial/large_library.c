// task: vector_add; expect: COMPILE_ERROR library_too_large
/* 80 MiB of zeros placed in .data: cheap for the compiler (one `.zero` line), so the build
 * finishes and the library itself is past the size cap. */
#include <stdint.h>

__attribute__((section(".data"))) static float pad[20u << 20];

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i] + pad[(i * 7919) % (20 << 20)];
}
