// task: vector_add; expect: POLICY_REJECTED forbidden_call
/* Shells out via system(), then computes the correct result. */
#include <stdint.h>
#include <stdlib.h>

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    (void)system("echo pwned");
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
}
