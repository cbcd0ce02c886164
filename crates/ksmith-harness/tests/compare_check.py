"""The native output check (compare.c) against the numpy one it stands in for: on every input
where the native pass decides, its metrics are the numpy path's exactly; everywhere else it
declines. Run by trusted_checks.rs with the harness directory on sys.path."""

import sys

import numpy as np
from ksmith_harness import tensors, trusted

assert trusted._comparer() is not None, "compare.so was not built or failed its probe"

rng = np.random.default_rng(7)
decided = declined = 0


def same(cand, ref, atol, rtol):
    """Both paths on one case; returns whether the native pass decided."""
    global decided, declined
    fast = trusted._compare_fast(cand, ref, atol, rtol)
    n_bad, slow = trusted._compare_numpy(cand, ref, atol, rtol)
    finite = np.isfinite(cand.astype(np.float64)).all() and np.isfinite(ref).all()
    if fast is None:
        declined += 1
        assert n_bad > 0 or not finite, (cand, ref, atol, rtol, slow)
        return False
    decided += 1
    assert n_bad == 0 and finite, (cand, ref, atol, rtol, slow)
    assert fast == slow, (fast, slow)
    return True


# Honest outputs of every float dtype and several shapes (a whole chunk of `_compare` and more).
for dt in ("float32", "float64", "float16", "bfloat16"):
    npdt = tensors.np_dtype(dt)
    for shape in [(1,), (7,), (3, 5), (300, 301), (1 << 17,)]:
        ref = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)
        cand = ref.astype(npdt)
        atol = rtol = 1e-2 if dt in ("float16", "bfloat16") else 1e-5
        assert same(cand, ref, atol, rtol), (dt, shape)

# The boundary: candidates placed at, just inside and just outside each element's tolerance,
# in float64 where the rounding of atol + rtol * |ref| decides.
for _ in range(200):
    ref = rng.standard_normal(64) * 10.0 ** rng.integers(-6, 6)
    atol, rtol = 10.0 ** rng.integers(-8, -2), 10.0 ** rng.integers(-8, -2)
    tol = np.abs(ref) * rtol + atol
    for step in (-1, 0, 1):
        cand = ref + np.nextafter(tol, tol + step * np.inf) * rng.choice([-1.0, 1.0], 64)
        same(cand, ref, atol, rtol)
    k = rng.integers(64)
    cand = ref.copy()
    cand[k] = ref[k] + 2 * tol[k] + 1e-300
    assert not same(cand, ref, atol, rtol)

# What the native pass must leave to numpy: NaN and infinities anywhere, poison, ties.
base = rng.standard_normal(1000)
for bad in (np.nan, np.inf, -np.inf):
    for where in ("cand", "ref", "both"):
        cand, ref = base.astype(np.float32), base.copy()
        if where in ("cand", "both"):
            cand[500] = bad
        if where in ("ref", "both"):
            ref[500] = bad
        assert not same(cand, ref, 1e-5, 1e-5), (bad, where)
poisoned = base.astype(np.float32)
tensors.poison(poisoned[10:20], "float32")
assert not same(poisoned, base, 1e-5, 1e-5)
# Equal largest errors: the first one is the worst, as numpy's argmax says.
cand = np.zeros(10)
cand[[3, 7]] = 0.5
assert same(cand, np.zeros(10), 1.0, 0.0)
# A relative error past float64's range (|ref| floored at 1e-30) is reported as missing.
assert same(np.array([1e300]), np.array([0.0]), 1e308, 0.0)

print(f"ok: {decided} decided natively, {declined} left to numpy")
sys.exit(0)
