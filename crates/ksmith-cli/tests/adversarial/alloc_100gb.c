// task: vector_add; expect: RUNTIME_ERROR signal_SIGSEGV
/* Asks for a 100 GiB scratch buffer and uses it (c[i] is written via tmp[i]).
 * The pointer escapes through a volatile global so the allocation cannot be
 * elided.  There is deliberately no NULL check: malloc returns NULL under the address-space
 * limit and the write faults. The judge reports what it saw (the signal); the allocation
 * guard's note of the failed allocation is added to the detail as the runner's claim. */
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
