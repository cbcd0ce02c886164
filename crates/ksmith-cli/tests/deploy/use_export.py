"""Run by tests/deploy.rs in a fresh virtual environment where the export was pip-installed:
uses every kernel the way a JAX user would and checks what it computes and which path it took."""

import os
import sys

import jax
import jax.numpy as jnp
import ksmith_kernels as kk
import numpy as np

expect_prefix = sys.argv[1]
assert os.path.realpath(kk.__file__).startswith(os.path.realpath(expect_prefix)), (kk.__file__, expect_prefix)

status = kk.status()
assert all(v == "ready" for v in status.values()), status
assert sorted(kk.kernels) == ["layernorm", "matmul", "rmsnorm", "softmax", "vector_add"], sorted(kk.kernels)


def inputs(k, axes, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for spec in k.inputs:
        shape = [axes[a] for a in spec["shape"]]
        out.append(jnp.asarray(rng.normal(0.0, 1.0, size=shape).astype(spec["dtype"])))
    return out


def check(k, args, got):
    got = got if isinstance(got, tuple) else (got,)
    with jax.enable_x64(True):
        ref = k.reference(*[jnp.asarray(np.asarray(a, dtype=np.float64)) for a in args])
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    for spec, g, r in zip(k.outputs, got, ref, strict=True):
        g = np.asarray(g, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        assert g.shape == r.shape, (k.name, g.shape, r.shape)
        bad = np.abs(g - r) > spec["atol"] + spec["rtol"] * np.abs(r)
        assert not bad.any(), (k.name, spec["name"], float(np.abs(g - r).max()))


for name, k in sorted(kk.kernels.items()):
    # Every kernel from jax.jit code, on its smallest validated workload; the compiled graph holds
    # the kernel's FFI custom call (the kernel ran, not the fallback).
    w = min(k.spec["workloads"], key=lambda w: np.prod(list(w["axes"].values())))
    args = inputs(k, w["axes"])
    fn = jax.jit(lambda *a, k=k: k(*a))
    assert k.spec["target"] in fn.lower(*args).as_text(), name
    check(k, args, fn(*args))
    print(f"{name}: jit ok on {w['axes']}")

# vmap: one call per batch element.
sm = kk.softmax
xb = jnp.asarray(np.random.default_rng(1).normal(size=(3, 70, 650)).astype(np.float32))
yb = jax.jit(jax.vmap(sm))(xb)
for i in range(3):
    check(sm, [xb[i]], yb[i])
print("vmap ok")

# The decorator: the kernel inside the envelope, the user's own function outside it.
calls = []


@kk.apply("softmax")
def my_softmax(x):
    calls.append(x.shape)
    return jax.nn.softmax(x, axis=-1)


x = jnp.asarray(np.random.default_rng(2).normal(size=(100, 700)).astype(np.float32))
check(sm, [x], my_softmax(x))
assert calls == [], calls
assert my_softmax.why_not(x) is None
assert sm.spec["target"] in jax.jit(my_softmax).lower(x).as_text()

small = jnp.ones((3, 5), jnp.float32)  # M=3 below the validated range
my_softmax(small)
assert calls == [(3, 5)], calls
assert "outside the validated range" in my_softmax.why_not(small), my_softmax.why_not(small)

half = x.astype(jnp.float16)  # a dtype the kernel was not judged on
my_softmax(half)
assert calls[-1] == (100, 700) and len(calls) == 2, calls
assert "float16" in my_softmax.why_not(half)


# any_shape=True opts in to every shape the signature allows.
@kk.apply("softmax", any_shape=True)
def any_softmax(x):
    raise AssertionError("the kernel should have been used")


check(sm, [small], any_softmax(small))

# Direct calls outside the envelope go to the reference; a wrong dtype is an error.
assert sm.spec["target"] not in jax.jit(sm).lower(small).as_text()
check(sm, [small], sm(small))
try:
    sm(half)
    raise AssertionError("a float16 input was accepted")
except TypeError as e:
    assert "float16" in str(e), e
try:
    kk.vector_add(jnp.ones((10,), jnp.float32), jnp.ones((11,), jnp.float32))
    raise AssertionError("inconsistent axes were accepted")
except ValueError as e:
    assert "N=" in str(e), e

# Derivatives: through the decorated function for apply, through the reference for direct calls.
wts = jnp.asarray(np.random.default_rng(3).normal(size=x.shape).astype(np.float32))
want = jax.grad(lambda z: (jax.nn.softmax(z, axis=-1) * wts).sum())(x)
for f in (my_softmax, sm):
    g = jax.jit(jax.grad(lambda z, f=f: (f(z) * wts).sum()))(x)
    assert float(jnp.abs(g - want).max()) < 1e-5, float(jnp.abs(g - want).max())
print("grad ok")

# The switch turns every substitution off.
os.environ["KSMITH_KERNELS_DISABLE"] = "1"
before = len(calls)
my_softmax(x)
assert len(calls) == before + 1, calls
assert sm.spec["target"] not in jax.jit(sm).lower(x).as_text()
del os.environ["KSMITH_KERNELS_DISABLE"]
print("apply ok")
