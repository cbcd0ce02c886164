// task: vector_add; expect: RUNTIME_ERROR memory_limit
/* Asks for a 100 GiB scratch buffer and uses it (c[i] is written via tmp[i]).
 * The pointer escapes through a volatile global so the allocation cannot be
 * elided.  There is deliberately no NULL check. */
#include <stdint.h>
#include <stdlib.h>

static float* volatile keep_alive;

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    float* tmp = malloc(100ULL << 30);
    keep_alive = tmp;
    for (int64_t i = 0; i < N; i++)
        tmp[i] = a[i] + b[i];
    for (int64_t i = 0; i < N; i++)
        c[i] = tmp[i];
}
