// task: vector_add; expect: RUNTIME_ERROR signal_SIGSEGV; timed
/* Correct through the checks, then crashes once timing is under way: vector_add's checks make
 * 10 calls (a quick check, 3 workloads x 3 seeds) and its first timed round 2 warm-up calls,
 * so call 13 is the first timed one. (It crashed at call 41 until 2026-12-02, which a loaded
 * machine, timing fewer calls to reach --min-time-ms, sometimes never reached.)
 * The timing channel is a datagram socket, which says nothing when its peer dies: the
 * judge must notice the process's exit at once and report the crash, not wait out the call
 * limit and report a timeout. */
#include <stdint.h>

static volatile uintptr_t wild_address = 16;
static int calls;

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    if (++calls > 12) {
        volatile float* p = (volatile float*)wild_address;
        *p = 1.0f;
    }
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
}
