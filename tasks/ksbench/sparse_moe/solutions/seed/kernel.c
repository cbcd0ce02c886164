/* Seed top-K MoE.
 * 1) Router (parallel over tokens): logits = x @ w_r + b_r, stable softmax, pick the
 *    K largest probabilities (lowest index on ties), renormalize.
 * 2) Group (serial): list the (token, slot) pairs routed to each expert.
 * 3) Experts (parallel over (expert, block of BM routed tokens) tiles): h = silu(x_rows @ w1[e]),
 *    then out_rows = p * (h @ w2[e]) written to a per-(token, slot) buffer (no races).
 * 4) y[t] = sum over slots (parallel over tokens). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BM
#define BM 8
#endif

void sparse_moe(const float* x, const float* w_r, const float* b_r, const float* w1,
                const float* w2, float* y, int64_t T, int64_t Dm, int64_t F, int64_t E,
                int64_t K) {
    int32_t* sel = malloc((size_t)T * K * sizeof(int32_t));
    float* gate = malloc((size_t)T * K * sizeof(float));
    float* slot_out = malloc((size_t)T * K * Dm * sizeof(float));

#pragma omp parallel
    {
        float* p = malloc((size_t)E * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            const float* xr = x + t * Dm;
            for (int64_t e = 0; e < E; e++) p[e] = b_r[e];
            for (int64_t d = 0; d < Dm; d++) {
                float xv = xr[d];
                for (int64_t e = 0; e < E; e++) p[e] += xv * w_r[d * E + e];
            }
            float m = p[0];
            for (int64_t e = 1; e < E; e++) m = p[e] > m ? p[e] : m;
            float s = 0.0f;
            for (int64_t e = 0; e < E; e++) {
                p[e] = expf(p[e] - m);
                s += p[e];
            }
            for (int64_t e = 0; e < E; e++) p[e] /= s;
            float tot = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                int64_t best = -1;
                for (int64_t e = 0; e < E; e++)
                    if (p[e] >= 0.0f && (best < 0 || p[e] > p[best])) best = e;
                sel[t * K + k] = (int32_t)best;
                gate[t * K + k] = p[best];
                tot += p[best];
                p[best] = -1.0f; /* taken */
            }
            for (int64_t k = 0; k < K; k++) gate[t * K + k] /= tot;
        }
        free(p);
    }

    /* counting sort of the T*K (token, slot) pairs by expert */
    int64_t* start = calloc((size_t)E + 1, sizeof(int64_t));
    int64_t* order = malloc((size_t)T * K * sizeof(int64_t));
    for (int64_t i = 0; i < T * K; i++) start[sel[i] + 1]++;
    for (int64_t e = 0; e < E; e++) start[e + 1] += start[e];
    {
        int64_t* fill = malloc((size_t)E * sizeof(int64_t));
        memcpy(fill, start, (size_t)E * sizeof(int64_t));
        for (int64_t i = 0; i < T * K; i++) order[fill[sel[i]]++] = i;
        free(fill);
    }

    /* tiles: (expert, block of BM of its routed pairs) */
    int64_t ntiles = 0;
    for (int64_t e = 0; e < E; e++) ntiles += (start[e + 1] - start[e] + BM - 1) / BM;
    int64_t* tile_e = malloc((size_t)(ntiles + 1) * sizeof(int64_t));
    int64_t* tile_lo = malloc((size_t)(ntiles + 1) * sizeof(int64_t));
    {
        int64_t n = 0;
        for (int64_t e = 0; e < E; e++)
            for (int64_t lo = start[e]; lo < start[e + 1]; lo += BM) {
                tile_e[n] = e;
                tile_lo[n] = lo;
                n++;
            }
    }

#pragma omp parallel
    {
        float* h = malloc((size_t)BM * F * sizeof(float));
#pragma omp for schedule(dynamic, 1)
        for (int64_t ti = 0; ti < ntiles; ti++) {
            int64_t e = tile_e[ti], lo = tile_lo[ti];
            int64_t hi = lo + BM < start[e + 1] ? lo + BM : start[e + 1];
            const float* W1 = w1 + e * Dm * F;
            const float* W2 = w2 + e * F * Dm;
            for (int64_t r = lo; r < hi; r++) {
                int64_t pair = order[r], t = pair / K;
                const float* xr = x + t * Dm;
                float* hr = h + (r - lo) * F;
                for (int64_t f = 0; f < F; f++) hr[f] = 0.0f;
                for (int64_t d = 0; d < Dm; d++) {
                    float xv = xr[d];
                    const float* wr = W1 + d * F;
                    for (int64_t f = 0; f < F; f++) hr[f] += xv * wr[f];
                }
                for (int64_t f = 0; f < F; f++) hr[f] = hr[f] / (1.0f + expf(-hr[f]));
            }
            for (int64_t r = lo; r < hi; r++) {
                int64_t pair = order[r];
                const float* hr = h + (r - lo) * F;
                float* o = slot_out + pair * Dm;
                for (int64_t d = 0; d < Dm; d++) o[d] = 0.0f;
                for (int64_t f = 0; f < F; f++) {
                    float hv = hr[f];
                    const float* wr = W2 + f * Dm;
                    for (int64_t d = 0; d < Dm; d++) o[d] += hv * wr[d];
                }
                float g = gate[pair];
                for (int64_t d = 0; d < Dm; d++) o[d] *= g;
            }
        }
        free(h);
    }

#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float* yr = y + t * Dm;
        for (int64_t d = 0; d < Dm; d++) yr[d] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float* o = slot_out + (t * K + k) * Dm;
            for (int64_t d = 0; d < Dm; d++) yr[d] += o[d];
        }
    }

    free(sel);
    free(gate);
    free(slot_out);
    free(start);
    free(order);
    free(tile_e);
    free(tile_lo);
}
