/* C = A @ B, row-major f32.  BLIS-style GEMM:
 *   - B is packed per (KC x NC) block into NR-wide column panels (shared),
 *   - A is packed per (MC x KC) block into MR-tall row panels (per thread),
 *   - a 6x16 register-blocked micro-kernel (12 x 8-lane accumulators) written
 *     with GCC vector extensions -> vfmadd231ps + vbroadcastss with -march=native,
 *   - OpenMP over MC row blocks; edges handled by zero-padded packing and a
 *     scratch tile.  Accumulation order along k differs from XLA's (blocked by KC).
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef MC
#define MC 72 /* rows of A per block (tunable; rounded up to a multiple of MR) */
#endif
#ifndef KC
#define KC 512 /* depth per block (tunable) */
#endif
#ifndef NC
#define NC 512 /* columns of B per block (tunable; rounded up to a multiple of NR) */
#endif

#define MR 6
#define NR 16
#define MCB (((MC) + MR - 1) / MR * MR)
#define NCB (((NC) + NR - 1) / NR * NR)

typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4)));

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* Pack rows [0,mc) x depth [0,kc) of A (leading dim lda) into MR-row panels:
 * Ap[panel][k][r], zero-padded to a multiple of MR rows. */
static void pack_a(int64_t mc, int64_t kc, const float* a, int64_t lda, float* restrict Ap) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        int64_t mr = imin(MR, mc - i0);
        for (int64_t k = 0; k < kc; k++) {
            for (int64_t r = 0; r < mr; r++) Ap[k * MR + r] = a[(i0 + r) * lda + k];
            for (int64_t r = mr; r < MR; r++) Ap[k * MR + r] = 0.0f;
        }
        Ap += kc * MR;
    }
}

/* Pack one NR-wide panel of B (depth kc, width nr <= NR) into Bp[k][c]. */
static void pack_b_panel(int64_t kc, int64_t nr, const float* b, int64_t ldb,
                         float* restrict Bp) {
    if (nr == NR) {
        for (int64_t k = 0; k < kc; k++) {
            *(v8f*)(Bp + k * NR) = *(const v8f_u*)(b + k * ldb);
            *(v8f*)(Bp + k * NR + 8) = *(const v8f_u*)(b + k * ldb + 8);
        }
    } else {
        for (int64_t k = 0; k < kc; k++) {
            for (int64_t c = 0; c < nr; c++) Bp[k * NR + c] = b[k * ldb + c];
            for (int64_t c = nr; c < NR; c++) Bp[k * NR + c] = 0.0f;
        }
    }
}

/* 6x16 micro-kernel: acc = Ap(6 x kc) * Bp(kc x 16); C[0:mr,0:nr] (+)= acc. */
static inline void ukernel(int64_t kc, const float* restrict Ap, const float* restrict Bp,
                           float* restrict C, int64_t ldc, int first, int64_t mr, int64_t nr) {
    v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    v8f c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        __builtin_prefetch(Bp + k * NR + 8 * NR);
        v8f b0 = *(const v8f*)(Bp + k * NR);
        v8f b1 = *(const v8f*)(Bp + k * NR + 8);
        const float* ap = Ap + k * MR;
        float a;
        a = ap[0]; c00 += a * b0; c01 += a * b1;
        a = ap[1]; c10 += a * b0; c11 += a * b1;
        a = ap[2]; c20 += a * b0; c21 += a * b1;
        a = ap[3]; c30 += a * b0; c31 += a * b1;
        a = ap[4]; c40 += a * b0; c41 += a * b1;
        a = ap[5]; c50 += a * b0; c51 += a * b1;
    }
    v8f acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                      {c30, c31}, {c40, c41}, {c50, c51}};
    if (mr == MR && nr == NR) {
        for (int r = 0; r < MR; r++) {
            v8f_u* p0 = (v8f_u*)(C + r * ldc);
            v8f_u* p1 = (v8f_u*)(C + r * ldc + 8);
            if (first) {
                *p0 = acc[r][0];
                *p1 = acc[r][1];
            } else {
                *p0 += acc[r][0];
                *p1 += acc[r][1];
            }
        }
    } else {
        float tile[MR * NR];
        for (int r = 0; r < MR; r++) {
            memcpy(tile + r * NR, &acc[r][0], sizeof(v8f));
            memcpy(tile + r * NR + 8, &acc[r][1], sizeof(v8f));
        }
        for (int64_t r = 0; r < mr; r++)
            for (int64_t c = 0; c < nr; c++) {
                if (first) C[r * ldc + c] = tile[r * NR + c];
                else C[r * ldc + c] += tile[r * NR + c];
            }
    }
}

void matmul(const float* a, const float* b, float* c, int64_t M, int64_t K, int64_t N) {
    if (K <= 0) {
        for (int64_t i = 0; i < M * N; i++) c[i] = 0.0f;
        return;
    }
    int64_t ncmax = imin(NCB, (N + NR - 1) / NR * NR);
    int64_t kcmax = imin(KC, K);
    float* Bp = aligned_alloc(64, (size_t)(ncmax * kcmax * sizeof(float) + 64) / 64 * 64);
    /* Balance the row blocks over the threads: a multiple of nthreads blocks of
     * (nearly) equal height, each <= MCB and a multiple of MR where possible. */
    int64_t nth = omp_get_max_threads();
    int64_t nblocks_m = (M + MCB - 1) / MCB;
    nblocks_m = (nblocks_m + nth - 1) / nth * nth;
    int64_t mcb = ((M + nblocks_m - 1) / nblocks_m + MR - 1) / MR * MR;
    nblocks_m = (M + mcb - 1) / mcb;

#pragma omp parallel
    {
        float* Ap = aligned_alloc(64, (size_t)(MCB * kcmax * sizeof(float) + 64) / 64 * 64);
        for (int64_t jc = 0; jc < N; jc += NCB) {
            int64_t nc = imin(NCB, N - jc);
            int64_t npanels = (nc + NR - 1) / NR;
            for (int64_t pc = 0; pc < K; pc += KC) {
                int64_t kc = imin(KC, K - pc);
#pragma omp for schedule(static)
                for (int64_t jp = 0; jp < npanels; jp++)
                    pack_b_panel(kc, imin(NR, nc - jp * NR), b + pc * N + jc + jp * NR, N,
                                 Bp + jp * kc * NR);
                /* implicit barrier: Bp complete */
#pragma omp for schedule(static)
                for (int64_t ib = 0; ib < nblocks_m; ib++) {
                    int64_t ic = ib * mcb;
                    int64_t mc = imin(mcb, M - ic);
                    pack_a(mc, kc, a + ic * K + pc, K, Ap);
                    for (int64_t jp = 0; jp < npanels; jp++) {
                        int64_t nr = imin(NR, nc - jp * NR);
                        for (int64_t i0 = 0; i0 < mc; i0 += MR)
                            ukernel(kc, Ap + i0 * kc, Bp + jp * kc * NR,
                                    c + (ic + i0) * N + jc + jp * NR, N, pc == 0,
                                    imin(MR, mc - i0), nr);
                    }
                }
                /* implicit barrier: done with Bp before it is repacked */
            }
        }
        free(Ap);
    }
    free(Bp);
}
