/* Seed grouped GEMM.  Group offsets by prefix sum; the work is cut into tiles of
 * (group, BM rows of that group, BN columns) so that tiles never straddle groups;
 * tiles run in parallel with dynamic scheduling (groups are very unequal).  i-k-j
 * order inside a tile: the inner j loop is a contiguous, vectorizable axpy. */
#include <stdint.h>
#include <stdlib.h>

#ifndef BM
#define BM 8
#endif
#ifndef BN
#define BN 128
#endif

void grouped_gemm(const float* lhs, const float* rhs, const int32_t* group_sizes, float* out,
                  int64_t M, int64_t K, int64_t N, int64_t G) {
    int64_t* off = malloc((size_t)(G + 1) * sizeof(int64_t));
    off[0] = 0;
    for (int64_t g = 0; g < G; g++) off[g + 1] = off[g] + group_sizes[g];
    int64_t tn = (N + BN - 1) / BN;
    int64_t nrow_tiles = 0;
    for (int64_t g = 0; g < G; g++) nrow_tiles += (group_sizes[g] + BM - 1) / BM;
    int64_t* tg = malloc((size_t)(nrow_tiles + 1) * sizeof(int64_t));
    int64_t* t0 = malloc((size_t)(nrow_tiles + 1) * sizeof(int64_t));
    int64_t n = 0;
    for (int64_t g = 0; g < G; g++)
        for (int64_t r = off[g]; r < off[g + 1]; r += BM) {
            tg[n] = g;
            t0[n] = r;
            n++;
        }

#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < nrow_tiles * tn; t++) {
        int64_t rt = t / tn, g = tg[rt], i0 = t0[rt];
        int64_t i1 = i0 + BM < off[g + 1] ? i0 + BM : off[g + 1];
        int64_t j0 = (t % tn) * BN, j1 = j0 + BN < N ? j0 + BN : N;
        const float* B = rhs + g * K * N;
        for (int64_t i = i0; i < i1; i++) {
            const float* ar = lhs + i * K;
            float* cr = out + i * N;
            for (int64_t j = j0; j < j1; j++) cr[j] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float av = ar[k];
                const float* br = B + k * N;
                for (int64_t j = j0; j < j1; j++) cr[j] += av * br[j];
            }
        }
    }
    /* rows past sum(group_sizes) (none when the sizes sum to M) are zero */
    for (int64_t i = off[G]; i < M; i++)
        for (int64_t j = 0; j < N; j++) out[i * N + j] = 0.0f;
    free(off);
    free(tg);
    free(t0);
}
