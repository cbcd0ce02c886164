// task: vector_add; expect: RUNTIME_ERROR signal_SIGSEGV; timed
/* Correct through the checks, then crashes once timing is under way (its 40th call).
 * The timing channel is a datagram socket, which says nothing when its peer dies: the
 * judge must notice the process's exit at once and report the crash, not wait out the call
 * limit and report a timeout. */
#include <stdint.h>

static volatile uintptr_t wild_address = 16;
static int calls;

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    if (++calls > 40) {
        volatile float* p = (volatile float*)wild_address;
        *p = 1.0f;
    }
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
}
