// task: vector_add; expect: COMPILE_ERROR library_too_large
/* A 768 MiB initialized table: the library would be as large. It once filled the runner's
 * directory (reported as the judge's own error, exit 3), stopped a whole search, and stayed in
 * the build cache. The compiler is stopped by its file-size limit: a verdict on the candidate. */
#include <stdint.h>

static const float table[192u << 20] = {1.0f, 2.0f, [100000000] = 3.0f, [200000000] = 4.0f};

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i] + 0.0f * table[(i * 7919) % (192 << 20)];
}
