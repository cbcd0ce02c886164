/* Seed bfloat16 RMSNorm: bfloat16 arrives as raw uint16_t bits.  Each row is widened to
 * float32, its sum of squares accumulated in double, then scaled and rounded back to
 * bfloat16 (round to nearest even).  Rows in parallel. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef CHUNK
#define CHUNK 4
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

void rmsnorm_llm_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, int64_t M, int64_t N) {
#pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t i = 0; i < M; i++) {
        const uint16_t* xr = x + i * N;
        uint16_t* yr = y + i * N;
        double ss = 0.0;
        for (int64_t j = 0; j < N; j++) {
            float v = bf16_to_f32(xr[j]);
            ss += (double)v * v;
        }
        float r = (float)(1.0 / sqrt(ss / (double)N + 1e-6));
        for (int64_t j = 0; j < N; j++) yr[j] = f32_to_bf16(bf16_to_f32(xr[j]) * r * bf16_to_f32(w[j]));
    }
}
