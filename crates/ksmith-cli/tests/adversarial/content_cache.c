// task: matmul; expect: PASSED; no faster than itself with -DKSMITH_HONEST
// Caches results keyed by a few sampled input values: every output it returns is correct (fresh
// inputs are computed, repeated inputs hit the cache). Every timed call gets inputs never seen
// before, so the cache never hits there: it must time like the same code without it.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 8

typedef struct {
    int64_t M, K, N;
    float k0, k1, k2, k3;
    float *c;
} entry;

static entry cache[SLOTS];
static int used;

void matmul(const float *a, const float *b, float *c, int64_t M, int64_t K, int64_t N) {
    float k0 = a[0], k1 = a[M * K - 1], k2 = b[0], k3 = b[(K * N) / 2];
#ifndef KSMITH_HONEST
    for (int i = 0; i < used; i++) {
        entry *e = &cache[i];
        if (e->M == M && e->K == K && e->N == N && e->k0 == k0 && e->k1 == k1 && e->k2 == k2 && e->k3 == k3) {
            memcpy(c, e->c, (size_t)(M * N) * sizeof(float));
            return;
        }
    }
#endif
#pragma omp parallel for
    for (int64_t i = 0; i < M; i++) {
        float *row = c + i * N;
        for (int64_t j = 0; j < N; j++) row[j] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            float aik = a[i * K + k];
            const float *brow = b + k * N;
            for (int64_t j = 0; j < N; j++) row[j] += aik * brow[j];
        }
    }
    entry *e = &cache[used < SLOTS ? used++ : 0];
    free(e->c);
    e->c = malloc((size_t)(M * N) * sizeof(float));
    memcpy(e->c, c, (size_t)(M * N) * sizeof(float));
    e->M = M, e->K = K, e->N = N, e->k0 = k0, e->k1 = k1, e->k2 = k2, e->k3 = k3;
}
