/* Row softmax: OpenMP over rows, 8-wide GCC vector extensions (AVX2/AVX-512 via
 * -march=native), and an inlined polynomial expf (Cephes-style, ~1-2 ulp) so the
 * exp pass vectorizes without libmvec.  Three passes per row (max, exp+sum,
 * scale); a row of up to ~64K floats stays in L2 between passes.
 * Built WITHOUT -ffast-math: the round-to-nearest trick below relies on
 * (t + C) - C not being simplified, and max-subtraction must be exact. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef CHUNK
#define CHUNK 8 /* rows per OpenMP scheduling chunk (tunable) */
#endif

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4)));

static inline v8f ld(const float* p) { return *(const v8f_u*)p; }
static inline void st(float* p, v8f v) { *(v8f_u*)p = v; }
/* lane-wise max (C has no vector ?:); both operands are never NaN here */
static inline v8f vmax(v8f a, v8f b) {
#ifdef __AVX__
    return __builtin_ia32_maxps256(a, b);
#else
    v8i m = a > b;
    return (v8f)(((v8i)a & m) | ((v8i)b & ~m));
#endif
}

/* exp(x) for x <= 0 (x - rowmax).  Clamped at -87 so that 2^n * p stays a normal
 * float (n >= -126 only when r > 0, i.e. p > 1); the clamped result (~1.6e-38) is
 * far below any tolerance.  Cephes expf polynomial: ~1 ulp on [-ln2/2, ln2/2]. */
static inline v8f vexp(v8f x) {
    const v8f lo = {-87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f};
    x = vmax(x, lo);
    const float magic = 12582912.0f; /* 1.5 * 2^23: the add rounds to an integer */
    v8f t = x * 1.44269504088896341f + magic;
    v8f n = t - magic;                  /* n = round(x / ln2) */
    v8f r = x - n * 0.693359375f;       /* Cody-Waite: ln2 = C1 + C2 */
    r = r - n * -2.12194440e-4f;
    v8f p = r * 1.9875691500E-4f + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    /* the low mantissa bits of t hold n (two's complement): n << 23 scales p by 2^n */
    return (v8f)((v8i)p + ((v8i)t << 23));
}

static inline float sexp(float x) {
    v8f v = {x, 0, 0, 0, 0, 0, 0, 0};
    return vexp(v)[0];
}

static void row(const float* restrict xr, float* restrict yr, int64_t N) {
    int64_t j = 0;
    float m = -INFINITY;
    if (N >= 16) {
        v8f m0 = ld(xr), m1 = ld(xr + 8);
        for (j = 16; j + 16 <= N; j += 16) {
            v8f a = ld(xr + j), b = ld(xr + j + 8);
            m0 = vmax(a, m0);
            m1 = vmax(b, m1);
        }
        m0 = vmax(m1, m0);
        for (int k = 0; k < 8; k++) m = m0[k] > m ? m0[k] : m;
    }
    for (; j < N; j++) m = xr[j] > m ? xr[j] : m;

    /* one accumulator: with 16 ymm registers a second one spills to the stack */
    v8f s0 = {0};
    for (j = 0; j + 8 <= N; j += 8) {
        v8f a = vexp(ld(xr + j) - m);
        st(yr + j, a);
        s0 += a;
    }
    float s = 0.0f;
    for (int k = 0; k < 8; k++) s += s0[k];
    for (; j < N; j++) {
        float e = sexp(xr[j] - m);
        yr[j] = e;
        s += e;
    }

    float inv = 1.0f / s;
    for (j = 0; j + 8 <= N; j += 8) st(yr + j, ld(yr + j) * inv);
    for (; j < N; j++) yr[j] *= inv;
}

void softmax(const float* x, float* y, int64_t M, int64_t N) {
#pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t i = 0; i < M; i++) row(x + i * N, y + i * N, N);
}
