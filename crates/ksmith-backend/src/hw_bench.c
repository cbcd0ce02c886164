/* ksmith hw: the machine's measured roofline. Prints one JSON object per run.
 * Built with the kernel flags (-O3 -march=native -fopenmp) on the machine it measures, so the
 * vector width and the streaming-store instruction below are this CPU's own (the compile-time
 * feature macros come from -march=native's CPUID probe: Zen 3 gets AVX2, Zen 4 and Sapphire
 * Rapids AVX-512, anything else SSE2 or the compiler's portable builtin).
 *
 *   hw_bench sweep MIN_BYTES MAX_BYTES STEPS_PER_OCTAVE
 *       read bandwidth (vector sum, every core) per working-set size, smallest first
 *   hw_bench streams BYTES
 *       read, copy and triad over BYTES in all (arrays together), with plain and with
 *       streaming (non-temporal) stores, on every core and on one core
 *   hw_bench fma
 *       FMA-loop peak with the widest SIMD, every core
 *
 * Bytes are counted the way a task's byte formula counts them: every array once, whatever the
 * hardware moved (a plain store's read-for-ownership is not counted), so the best figure is the
 * floor a kernel is judged against. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define VBYTES 64
#elif defined(__AVX__)
#define VBYTES 32
#else
#define VBYTES 16
#endif
typedef float vf __attribute__((vector_size(VBYTES)));
#define VL (VBYTES / 4)
/* Floats per unrolled step of the read loop (8 accumulators: enough loads in flight to reach
 * L1's bandwidth, where a single dependency chain would measure the adder's latency). */
#define STEP (8 * VL)
#define ALIGN 4096

#ifndef __has_builtin
#define __has_builtin(x) 0
#endif

/* One vector written past the caches where the CPU can, else an ordinary store. */
#if defined(__AVX512F__)
#define NT_KIND "avx512"
static inline void nt_store(float *p, vf v) { _mm512_stream_ps(p, (__m512)v); }
#elif defined(__AVX__)
#define NT_KIND "avx"
static inline void nt_store(float *p, vf v) { _mm256_stream_ps(p, (__m256)v); }
#elif defined(__SSE2__)
#define NT_KIND "sse2"
static inline void nt_store(float *p, vf v) { _mm_stream_ps(p, (__m128)v); }
#elif __has_builtin(__builtin_nontemporal_store)
#define NT_KIND "builtin"
static inline void nt_store(float *p, vf v) { __builtin_nontemporal_store(v, (vf *)p); }
#else
#define NT_KIND "none"
static inline void nt_store(float *p, vf v) { *(vf *)p = v; }
#endif

/* Streaming stores are weakly ordered: they must be drained before the clock stops. */
static inline void nt_fence(void) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_sfence();
#else
    __sync_synchronize();
#endif
}

/* Keeps the compiler from folding repeated passes over the same data into one. */
#define OPAQUE(p) __asm__ volatile("" : "+r"(p) : : "memory")

static volatile float sink[1024];

static float *alloc_floats(size_t n) {
    size_t bytes = (n * 4 + ALIGN - 1) / ALIGN * ALIGN;
    float *p = aligned_alloc(ALIGN, bytes);
    return p;
}

/* Thread t's share [lo, hi) of n floats, boundaries on STEP-float multiples. */
static void slice(size_t n, int t, int nt, size_t *lo, size_t *hi) {
    size_t steps = n / STEP;
    *lo = steps * (size_t)t / (size_t)nt * STEP;
    *hi = steps * (size_t)(t + 1) / (size_t)nt * STEP;
}

static void first_touch(float *a, size_t n, float v) {
#pragma omp parallel
    {
        size_t lo, hi;
        slice(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (size_t i = lo; i < hi; i++) a[i] = v;
        if (omp_get_thread_num() == omp_get_num_threads() - 1)
            for (size_t i = hi; i < n; i++) a[i] = v;
    }
}

static inline vf sum_range(const float *p, size_t lo, size_t hi, vf s) {
    vf s0 = s, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    for (size_t i = lo; i < hi; i += STEP) {
        s0 += *(const vf *)(p + i);
        s1 += *(const vf *)(p + i + VL);
        s2 += *(const vf *)(p + i + 2 * VL);
        s3 += *(const vf *)(p + i + 3 * VL);
        s4 += *(const vf *)(p + i + 4 * VL);
        s5 += *(const vf *)(p + i + 5 * VL);
        s6 += *(const vf *)(p + i + 6 * VL);
        s7 += *(const vf *)(p + i + 7 * VL);
    }
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

static float hsum(vf v) {
    float t = 0;
    for (int k = 0; k < VL; k++) t += v[k];
    return t;
}

/* Bytes one timed trial moves at most. Trials are short (a millisecond or two) so that on a
 * machine shared with other work some of them run undisturbed, and the best one is the figure;
 * a set larger than this is timed a window at a time, the windows taken in turn, so the window
 * timed was last touched a whole set ago and behaves as the whole set would. */
#define WINDOW_BYTES ((size_t)48 << 20)

/* Windows of `n` floats for `nt` threads: how many, and each one's length (STEP multiples). */
static size_t windows(size_t n, size_t per_window, int nt, size_t *len) {
    size_t k = n > per_window ? n / per_window : 1;
    size_t unit = (size_t)STEP * (size_t)nt;
    *len = n / k / unit * unit;
    return k;
}

/* Read bandwidth of a set of the first n floats of a on nt threads: `trials` timed trials (at
 * least one whole cycle of windows), each reading one window `inner` times, after `warm`
 * untimed ones; the best trial. The clock starts after a barrier that every thread has
 * reached (a thread still waking up, or waiting for a core another process holds, is not
 * timed) and stops after the barrier that the last one reaches. */
static double read_bw(const float *a, size_t n, int nt, long inner, int trials, int warm) {
    double best = 1e30, t0 = 0;
    size_t len;
    size_t k = windows(n, WINDOW_BYTES / 4, nt, &len);
    if (trials < (int)k) trials = (int)k;
#pragma omp parallel num_threads(nt)
    {
        int id = omp_get_thread_num();
        size_t lo, hi;
        slice(len, id, omp_get_num_threads(), &lo, &hi);
        for (int r = -warm; r < trials; r++) {
            const float *p = a + (size_t)((r + warm) % (int)k) * len;
#pragma omp barrier
#pragma omp master
            t0 = omp_get_wtime();
            vf s = {0};
            for (long j = 0; j < inner; j++) {
                OPAQUE(p);
                s = sum_range(p, lo, hi, s);
            }
            sink[id & 1023] = hsum(s);
#pragma omp barrier
#pragma omp master
            {
                double t = omp_get_wtime() - t0;
                if (r >= 0 && t < best) best = t;
            }
        }
    }
    return 4.0 * (double)len * (double)inner / best;
}

static int cmd_sweep(size_t min_bytes, size_t max_bytes, int per_octave) {
    size_t nmax = max_bytes / 4;
    float *a = alloc_floats(nmax);
    if (!a) return 1;
    first_touch(a, nmax, 1.0f);
    int nt = omp_get_max_threads();
    /* A small set is read over and over within a trial, so the barriers' cost stays a small
     * part of it. */
    const double per_trial = 8.0 * 1024 * 1024;
    printf("{\"threads\": %d, \"points\": [", nt);
    int first = 1;
    size_t last = 0;
    for (int i = 0;; i++) {
        double b = (double)min_bytes * pow(2.0, (double)i / per_octave);
        size_t bytes = (size_t)b / (STEP * 4 * (size_t)nt) * (STEP * 4 * (size_t)nt);
        if (bytes > max_bytes) break;
        if (bytes == 0 || bytes == last) continue;
        last = bytes;
        long inner = bytes < per_trial ? (long)ceil(per_trial / (double)bytes) : 1;
        size_t len;
        size_t k = windows(bytes / 4, WINDOW_BYTES / 4, nt, &len);
        /* Untimed first: one trial for a set read whole, one cycle of windows for a larger
         * one (the set is then where its size lets it stay). */
        double bw = read_bw(a, bytes / 4, nt, inner, 9, k > 1 ? (int)k : 1);
        printf("%s{\"bytes\": %zu, \"bytes_per_s\": %.6e}", first ? "" : ", ", bytes, bw);
        first = 0;
    }
    printf("]}\n");
    free(a);
    return 0;
}

enum kernel { READ, COPY, TRIAD };
static const char *kernel_name[] = {"read", "copy", "triad"};

/* One stream kernel over n floats per array on nt threads, counted bytes/s: the best of
 * `trials` trials (at least a whole cycle of windows), each over one window of every array
 * (timed between barriers, as `read_bw`). */
static double stream(enum kernel k, int nontemporal, float *a, float *b, float *c, size_t n, int nt,
                     int trials) {
    double best = 1e30, t0 = 0;
    int arrays = k == READ ? 1 : k == COPY ? 2 : 3;
    size_t len;
    size_t w = windows(n, WINDOW_BYTES / 4 / (size_t)arrays, nt, &len);
    if (trials < (int)w) trials = (int)w;
#pragma omp parallel num_threads(nt)
    {
        int id = omp_get_thread_num();
        size_t lo, hi;
        slice(len, id, omp_get_num_threads(), &lo, &hi);
        const vf s3 = (vf){0} + 3.0f;
        for (int r = 0; r < trials; r++) {
            size_t off = (size_t)(r % (int)w) * len;
            float *out = a + off;
            const float *x = b + off, *y = c + off;
            OPAQUE(out);
#pragma omp barrier
#pragma omp master
            t0 = omp_get_wtime();
            if (k == READ) {
                vf s = sum_range(out, lo, hi, (vf){0});
                sink[id & 1023] = hsum(s);
            } else if (k == COPY && nontemporal) {
                for (size_t i = lo; i < hi; i += VL) nt_store(out + i, *(const vf *)(x + i));
            } else if (k == COPY) {
                for (size_t i = lo; i < hi; i += VL) *(vf *)(out + i) = *(const vf *)(x + i);
            } else if (nontemporal) {
                for (size_t i = lo; i < hi; i += VL)
                    nt_store(out + i, *(const vf *)(x + i) + s3 * *(const vf *)(y + i));
            } else {
                for (size_t i = lo; i < hi; i += VL)
                    *(vf *)(out + i) = *(const vf *)(x + i) + s3 * *(const vf *)(y + i);
            }
            nt_fence();
#pragma omp barrier
#pragma omp master
            {
                double t = omp_get_wtime() - t0;
                if (t < best) best = t;
            }
        }
    }
    sink[0] = a[n / 2];
    return 4.0 * (double)len * arrays / best;
}

static int cmd_streams(size_t bytes) {
    /* Every kernel works over `bytes` in all, so each is as far past the caches as the others. */
    size_t n3 = bytes / 12, n2 = bytes / 8, n1 = bytes / 4;
    float *a = alloc_floats(n1), *b = alloc_floats(n2), *c = alloc_floats(n3);
    if (!a || !b || !c) return 1;
    first_touch(a, n1, 0.0f);
    first_touch(b, n2, 1.0f);
    first_touch(c, n3, 2.0f);
    int all = omp_get_max_threads();
    int counts[2] = {all, 1};
    printf("{\"threads\": %d, \"nontemporal\": \"%s\", \"bytes\": %zu, \"streams\": [", all, NT_KIND,
           bytes);
    int first = 1;
    for (int ti = 0; ti < (all > 1 ? 2 : 1); ti++) {
        int nt = counts[ti];
        for (int k = READ; k <= TRIAD; k++) {
            for (int nti = 0; nti < (k == READ ? 1 : 2); nti++) {
                size_t n = k == READ ? n1 : k == COPY ? n2 : n3;
                /* The read kernel reads `a`, the others write it (as STREAM does). */
                double bw = stream((enum kernel)k, nti, a, b, c, n, nt, 9);
                printf("%s{\"kernel\": \"%s\", \"stores\": \"%s\", \"threads\": %d, \"bytes_per_s\": %.6e}",
                       first ? "" : ", ", kernel_name[k],
                       k == READ ? "none" : nti ? "streaming" : "plain", nt, bw);
                first = 0;
            }
        }
    }
    printf("]}\n");
    free(a);
    free(b);
    free(c);
    return 0;
}

static volatile float seed_m = 0.999999f, seed_x = 1e-7f;
static volatile float fma_sink;

/* The FMA peak: `trials` short trials (a few milliseconds each, timed between barriers as
 * `read_bw`, so some run undisturbed on a shared machine), the best one. */
static double fma_peak(long iters, int trials) {
    double best = 1e30, t0 = 0;
#pragma omp parallel
    {
        vf acc[12];
        vf m, x;
        float ms = seed_m, xs = seed_x; /* runtime values: nothing can be constant-folded */
        for (int k = 0; k < VL; k++) { m[k] = ms; x[k] = xs * (float)(k + 1); }
        for (int j = 0; j < 12; j++) acc[j] = x * (float)(j + 1);
        for (int r = 0; r < trials; r++) {
#pragma omp barrier
#pragma omp master
            t0 = omp_get_wtime();
            for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
                for (int j = 0; j < 12; j++) acc[j] = acc[j] * m + x;
            }
#pragma omp barrier
#pragma omp master
            {
                double t = omp_get_wtime() - t0;
                if (t < best) best = t;
            }
        }
        vf s = acc[0];
        for (int j = 1; j < 12; j++) s += acc[j];
        fma_sink = hsum(s); /* every lane of every accumulator is live */
    }
    return 2.0 * VL * 12.0 * (double)iters * omp_get_max_threads() / best;
}

int main(int argc, char **argv) {
    if (argc >= 5 && !strcmp(argv[1], "sweep"))
        return cmd_sweep(strtoull(argv[2], 0, 10), strtoull(argv[3], 0, 10), atoi(argv[4]));
    if (argc >= 3 && !strcmp(argv[1], "streams")) return cmd_streams(strtoull(argv[2], 0, 10));
    if (argc >= 2 && !strcmp(argv[1], "fma")) {
        double peak = fma_peak(1000000, 40);
        printf("{\"fp32_flops_per_s\": %.6e, \"threads\": %d, \"vector_bits\": %d}\n", peak,
               omp_get_max_threads(), VBYTES * 8);
        return 0;
    }
    fprintf(stderr, "usage: hw_bench sweep MIN MAX STEPS | streams BYTES | fma\n");
    return 2;
}
