// task: vector_add; expect: INCORRECT_NUMERICAL stale_output
/* Memoizes by pointer identity: if this (a, b, N) was seen before, the result
 * computed then is copied into c without reading the inputs (stale if the
 * caller changed the buffers' contents).  Otherwise computes c = a + b and keeps
 * a malloc'd copy of it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 64

struct entry {
    const float* a;
    const float* b;
    int64_t n;
    float* result;
};

static struct entry cache[CACHE_SLOTS];
static int next_slot; /* round-robin replacement */

void vector_add(const float* a, const float* b, float* c, int64_t N) {
    for (int k = 0; k < CACHE_SLOTS; k++) {
        if (cache[k].result != NULL && cache[k].a == a && cache[k].b == b && cache[k].n == N) {
            memcpy(c, cache[k].result, (size_t)N * sizeof(float));
            return;
        }
    }
    for (int64_t i = 0; i < N; i++)
        c[i] = a[i] + b[i];
    float* copy = malloc((size_t)N * sizeof(float));
    if (copy == NULL)
        return;
    memcpy(copy, c, (size_t)N * sizeof(float));
    struct entry* e = &cache[next_slot];
    next_slot = (next_slot + 1) % CACHE_SLOTS;
    free(e->result);
    *e = (struct entry){a, b, N, copy};
}
