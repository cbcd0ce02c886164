/* Seed: per-row max, then sum of exp(x - max) with UNROLL partial sums, OpenMP over rows. */
#include <math.h>
#include <stdint.h>

#ifndef UNROLL
#define UNROLL 4
#endif

void cross_entropy(const float* logits, const int32_t* labels, float* loss, int64_t T, int64_t V) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < T; t++) {
        const float* x = logits + t * V;
        float m = x[0];
        for (int64_t j = 1; j < V; j++) m = x[j] > m ? x[j] : m;
        float acc[UNROLL];
        for (int u = 0; u < UNROLL; u++) acc[u] = 0.0f;
        int64_t j = 0;
        for (; j + UNROLL <= V; j += UNROLL)
            for (int u = 0; u < UNROLL; u++) acc[u] += expf(x[j + u] - m);
        float s = 0.0f;
        for (int u = 0; u < UNROLL; u++) s += acc[u];
        for (; j < V; j++) s += expf(x[j] - m);
        loss[t] = logf(s) + m - x[labels[t]];
    }
}
