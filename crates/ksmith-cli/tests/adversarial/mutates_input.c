// task: vector_add; expect: INCORRECT_NUMERICAL input_mutated
/* Computes c = a + b correctly, then overwrites the const input a with c through
 * a cast-away-const pointer.  The output itself is correct. */
#include <stdint.h>

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
    float* a_mut = (float*)a;
    for (int64_t i = 0; i < N; i++)
        a_mut[i] = c[i];
}
