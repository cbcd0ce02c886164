// task: vector_add; expect: RUNTIME_ERROR signal_SIGSEGV
/* Writes through a wild pointer into the never-mapped first page.  The address is
 * read from a volatile object so the compiler cannot prove it null/invalid and
 * replace the store with a trap (which would raise SIGILL instead). */
#include <stdint.h>

static volatile uintptr_t wild_address = 16;

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    volatile float* p = (volatile float*)wild_address;
    *p = 1.0f; /* SIGSEGV here, before any output is written */
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
}
