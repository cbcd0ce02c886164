/* c = a + b: memory-bound.  Split into BLOCK-element chunks distributed
 * statically over the OpenMP threads; each chunk is a unit-stride SIMD loop. */
#include <stdint.h>

#ifndef BLOCK
#define BLOCK 16384 /* elements per chunk (tunable) */
#endif

void vector_add(const float* restrict a, const float* restrict b, float* restrict c,
                int64_t N) {
    int64_t nb = (N + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t lo = blk * BLOCK;
        int64_t hi = lo + BLOCK < N ? lo + BLOCK : N;
#pragma omp simd
        for (int64_t i = lo; i < hi; i++)
            c[i] = a[i] + b[i];
    }
}
