// task: vector_add; expect: TIMEOUT wall_timeout
/* Never returns.  Each iteration is a volatile access (an observable side effect),
 * so the compiler may not delete the loop or assume it terminates. */
#include <stdint.h>

static volatile uint64_t spin_counter;

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    for (;;)
        spin_counter++;
    for (int64_t i = 0; i < N; i++) /* unreachable */
        c[i] = a[i] + b[i];
}
