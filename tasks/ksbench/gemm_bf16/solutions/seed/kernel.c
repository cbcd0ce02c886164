/* Seed bfloat16 GEMM, float32 accumulation: c = bf16(a @ b); bfloat16 arrives as raw
 * uint16_t bits.  b is widened to float32 once per call (parallel), then the output is
 * cut into BM x BN tiles processed in parallel; each tile accumulates in a float32
 * buffer with the K loop blocked by BK (i-k-j order: the inner j loop is a contiguous
 * axpy the compiler vectorizes) and is rounded to bfloat16 (nearest even) at the end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BM
#define BM 16
#endif
#ifndef BK
#define BK 256
#endif
#ifndef BN
#define BN 256
#endif

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

void gemm_bf16(const uint16_t* a, const uint16_t* b, uint16_t* c, int64_t M, int64_t K, int64_t N) {
    float* bf = malloc((size_t)K * (size_t)N * sizeof(float));
    if (!bf) return;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) bf[k * N + j] = bf16_to_f32(b[k * N + j]);
    int64_t tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tm * tn; t++) {
        float acc[BM][BN];
        int64_t i0 = (t / tn) * BM, j0 = (t % tn) * BN;
        int64_t i1 = i0 + BM < M ? i0 + BM : M;
        int64_t j1 = j0 + BN < N ? j0 + BN : N;
        memset(acc, 0, sizeof acc);
        for (int64_t k0 = 0; k0 < K; k0 += BK) {
            int64_t k1 = k0 + BK < K ? k0 + BK : K;
            for (int64_t i = i0; i < i1; i++) {
                float* cr = acc[i - i0] - j0;
                for (int64_t k = k0; k < k1; k++) {
                    float av = bf16_to_f32(a[i * K + k]);
                    const float* br = bf + k * N;
                    for (int64_t j = j0; j < j1; j++) cr[j] += av * br[j];
                }
            }
        }
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = j0; j < j1; j++) c[i * N + j] = f32_to_bf16(acc[i - i0][j - j0]);
    }
    free(bf);
}
