// task: vector_add; expect: PASSED; timed
/* Red team 2026-12-06 (known limit, docs/judge.md): the candidate decides which of its rounds
 * the judge drops as "disturbed". A turn is disturbed when its threads' summed run-queue wait
 * exceeds 10% of its timed time, and the judge sums over every thread of the sandbox listed
 * at the round's start, which the candidate makes: 64 OpenMP threads made in the first call
 * sit idle, and in a call it wants dropped (one slower than its fastest so far at that size)
 * it wakes them all for a moment, so 64 threads queue for 2 cores and their waits add up to
 * far more than the turn's allowance. The round is dropped and timed again, up to 8 times per
 * workload: its slow rounds go, the baseline's are redone whatever they were, and the kept
 * rounds are the candidate's luckiest. The kernel is correct (PASSED is right); what is wrong
 * is the speedup's selection of rounds. */
#include <stdint.h>
#include <omp.h>

#define CROWD 64
static uint64_t best[8];
static int64_t size_of[8];
static int drops[8];

static int slot(int64_t n) {
    for (int i = 0; i < 8; i++)
        if (size_of[i] == n || size_of[i] == 0) { size_of[i] = n; return i; }
    return 7;
}

void vector_add(const float* restrict a, const float* restrict b, float* restrict c, int64_t N) {
    static int made;
    if (!made) {
        made = 1;
#pragma omp parallel num_threads(CROWD)
        { (void)omp_get_thread_num(); }
    }
    uint64_t t0 = __builtin_ia32_rdtsc();
#pragma omp parallel for simd schedule(static) num_threads(2)
    for (int64_t i = 0; i < N; i++) c[i] = a[i] + b[i];
    uint64_t dt = __builtin_ia32_rdtsc() - t0;
#ifndef KSMITH_HONEST
    int s = slot(N);
    if (best[s] == 0 || dt < best[s]) best[s] = dt;
    else if (dt > best[s] + best[s] / 8 && drops[s] < 8) {
        drops[s]++;
        /* Everyone runnable at once for a moment: summed wait, not time, is what counts. */
#pragma omp parallel num_threads(CROWD)
        {
            uint64_t u = __builtin_ia32_rdtsc();
            while (__builtin_ia32_rdtsc() - u < 200000) __builtin_ia32_pause();
        }
    }
#endif
}
