/* Loaded by the trusted server (ctypes): the tolerance check of one output against its float64
 * reference in a single pass, |cand - ref| <= atol + rtol * |ref| per element, in float64 and
 * in the same operation order as the numpy path in trusted.py (built with -ffp-contract=off,
 * so no fused multiply-add changes a rounding at the boundary). Checking an output used to
 * take a dozen numpy passes per element; this is one pass at memory speed.
 *
 * It decides only the common case: every value finite on both sides and every element within
 * tolerance. Anything else (a non-finite value, an element out of tolerance) returns -1, and
 * the caller takes the numpy path, which owns the corner cases (infinities that match, NaN
 * scores, the worst element of a failure). Returns 1 when decided, with the statistics in
 * `stats`: max absolute error, max relative error (|ref| floored at 1e-30), and the first
 * index of the largest absolute error. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double max_abs;
    double max_rel;
    int64_t worst;
} ksmith_compare_stats;

#define KSMITH_COMPARE_LOOP(T)                                                   \
    for (size_t i = 0; i < n; i++) {                                             \
        double c = (double)((const T *)cand)[i], r = ref[i];                     \
        if (!isfinite(c) || !isfinite(r)) return -1;                             \
        double err = fabs(c - r);                                                \
        double absr = fabs(r);                                                   \
        double tol = absr * rtol;                                                \
        tol = tol + atol;                                                        \
        if (!(err <= tol)) return -1;                                            \
        if (err > worst_err) {                                                   \
            worst_err = err;                                                     \
            worst = (int64_t)i;                                                  \
        }                                                                        \
        double rel = err / (absr > 1e-30 ? absr : 1e-30);                        \
        if (rel > max_rel) max_rel = rel;                                        \
    }

/* `cand_width`: 4 (float32) or 8 (float64); anything else returns -2. */
int ksmith_compare(const void *cand, int cand_width, const double *ref, size_t n, double atol,
                   double rtol, ksmith_compare_stats *stats) {
    double worst_err = -1.0, max_rel = 0.0;
    int64_t worst = 0;
    if (cand_width == 4) {
        KSMITH_COMPARE_LOOP(float)
    } else if (cand_width == 8) {
        KSMITH_COMPARE_LOOP(double)
    } else {
        return -2;
    }
    stats->max_abs = worst_err > 0.0 ? worst_err : 0.0;
    stats->max_rel = max_rel;
    stats->worst = worst;
    return 1;
}
