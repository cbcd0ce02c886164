/* ksmith hw: STREAM-like triad (DRAM and cache-resident) and an FMA peak loop.
 * Prints one JSON object. Built with the kernel flags (-O3 -march=native -fopenmp). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__AVX512F__)
#define VBYTES 64
#elif defined(__AVX__)
#define VBYTES 32
#else
#define VBYTES 16
#endif
typedef float vf __attribute__((vector_size(VBYTES)));
#define VL (VBYTES / 4)

static double triad(size_t n, int reps) {
    float *a = aligned_alloc(64, n * 4), *b = aligned_alloc(64, n * 4), *c = aligned_alloc(64, n * 4);
    if (!a || !b || !c) return 0;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = 1.0f; c[i] = 2.0f; }
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
        t = omp_get_wtime() - t;
        if (t < best) best = t;
    }
    volatile float sink = a[n / 2];
    (void)sink;
    free(a); free(b); free(c);
    return 3.0 * 4.0 * (double)n / best; /* bytes/s: read b, c; write a */
}

static volatile float seed_m = 0.999999f, seed_x = 1e-7f;
static volatile float fma_sink;

static double fma_peak(long iters) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = omp_get_wtime();
#pragma omp parallel
        {
            vf acc[12];
            vf m, x;
            float ms = seed_m, xs = seed_x; /* runtime values: nothing can be constant-folded */
            for (int k = 0; k < VL; k++) { m[k] = ms; x[k] = xs * (float)(k + 1); }
            for (int j = 0; j < 12; j++) acc[j] = x * (float)(j + 1);
            for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
                for (int j = 0; j < 12; j++) acc[j] = acc[j] * m + x;
            }
            vf s = acc[0];
            for (int j = 1; j < 12; j++) s += acc[j];
            float total = 0;
            for (int k = 0; k < VL; k++) total += s[k];
            fma_sink = total; /* every lane of every accumulator is live */
        }
        t = omp_get_wtime() - t;
        if (t < best) best = t;
    }
    return 2.0 * VL * 12.0 * (double)iters * omp_get_max_threads() / best;
}

int main(int argc, char **argv) {
    size_t big = argc > 1 ? strtoull(argv[1], 0, 10) : (size_t)64 << 20;
    size_t small = argc > 2 ? strtoull(argv[2], 0, 10) : (size_t)256 << 10;
    double dram = triad(big, 5);
    double cache = triad(small, 200);
    double peak = fma_peak(20000000);
    printf("{\"dram_bytes_per_s\": %.6e, \"cache_bytes_per_s\": %.6e, \"fp32_flops_per_s\": %.6e, "
           "\"threads\": %d, \"vector_bits\": %d, \"triad_elements\": %zu, \"cache_triad_elements\": %zu}\n",
           dram, cache, peak, omp_get_max_threads(), VBYTES * 8, big, small);
    return 0;
}
