// task: vector_add; expect: INCORRECT_NUMERICAL output_unwritten
/* Tells the correctness runs from the timed calls by its buffers: timed calls got page-aligned
 * shared mappings while correctness runs got malloc'd arrays, so this kernel was correct in
 * every check and skipped half its work only when timed (the timed re-checks caught it). Now
 * both phases get the same kind of buffers: it skips the work in the checks too, and fails
 * them even without timing. */
#include <stdint.h>

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    int timed = (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 4095) == 0;
    int64_t n = timed ? N / 2 : N;
    for (int64_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}
