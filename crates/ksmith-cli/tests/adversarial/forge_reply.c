// task: vector_add; expect: POLICY_REJECTED forbidden_call
// Tries to write a fake "success" reply with an impossible timing onto the harness's channel.
#include <stdint.h>
#include <stdio.h>

void vector_add(const float *a, const float *b, float *c, int64_t N) {
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
    for (int fd = 3; fd < 16; fd++) {
        FILE *f = fdopen(fd, "w");
        if (f) {
            fprintf(f, "{\"ok\": true, \"samples_ns\": [1, 1, 1]}\n");
            fflush(f);
        }
    }
}
