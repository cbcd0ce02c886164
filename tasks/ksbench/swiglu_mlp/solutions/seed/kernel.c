/* Seed SwiGLU MLP.  Two phases, each over BM x BN output tiles in parallel:
 *   1) h = silu(x @ w_gate) * (x @ w_up)   [T, F] scratch (gate and up share the x loads)
 *   2) y = h @ w_down                     [T, Dm]
 * i-k-j order inside a tile: the inner j loop is a contiguous axpy over a BN-wide
 * slice of the weight row, which the compiler vectorizes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BM
#define BM 8
#endif
#ifndef BN
#define BN 256
#endif

void swiglu_mlp(const float* x, const float* w_gate, const float* w_up, const float* w_down,
                float* y, int64_t T, int64_t Dm, int64_t F) {
    float* g = malloc((size_t)T * F * sizeof(float));
    float* u = malloc((size_t)T * F * sizeof(float));
    int64_t tm = (T + BM - 1) / BM;

    int64_t tn = (F + BN - 1) / BN;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tm * tn; t++) {
        int64_t i0 = (t / tn) * BM, j0 = (t % tn) * BN;
        int64_t i1 = i0 + BM < T ? i0 + BM : T;
        int64_t j1 = j0 + BN < F ? j0 + BN : F;
        for (int64_t i = i0; i < i1; i++) {
            float* gr = g + i * F;
            float* ur = u + i * F;
            for (int64_t j = j0; j < j1; j++) gr[j] = ur[j] = 0.0f;
            for (int64_t k = 0; k < Dm; k++) {
                float xv = x[i * Dm + k];
                const float* wg = w_gate + k * F;
                const float* wu = w_up + k * F;
                for (int64_t j = j0; j < j1; j++) {
                    gr[j] += xv * wg[j];
                    ur[j] += xv * wu[j];
                }
            }
            for (int64_t j = j0; j < j1; j++) gr[j] = gr[j] / (1.0f + expf(-gr[j])) * ur[j];
        }
    }

    tn = (Dm + BN - 1) / BN;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < tm * tn; t++) {
        int64_t i0 = (t / tn) * BM, j0 = (t % tn) * BN;
        int64_t i1 = i0 + BM < T ? i0 + BM : T;
        int64_t j1 = j0 + BN < Dm ? j0 + BN : Dm;
        for (int64_t i = i0; i < i1; i++) {
            float* yr = y + i * Dm;
            const float* hr = g + i * F;
            for (int64_t j = j0; j < j1; j++) yr[j] = 0.0f;
            for (int64_t k = 0; k < F; k++) {
                float hv = hr[k];
                const float* wd = w_down + k * Dm;
                for (int64_t j = j0; j < j1; j++) yr[j] += hv * wd[j];
            }
        }
    }
    free(g);
    free(u);
}
