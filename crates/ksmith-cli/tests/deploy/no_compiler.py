"""Run by tests/deploy.rs with CC pointing nowhere and an empty build cache: the package says why
the kernel is unavailable and every call computes the reference instead."""

import warnings

import jax
import jax.numpy as jnp
import ksmith_kernels as kk
import numpy as np

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    status = kk.softmax.status()
assert status.startswith("unavailable: no compiler `no-such-cc`"), status
assert any("kernel unavailable, using the fallback" in str(w.message) for w in caught), [str(w.message) for w in caught]

x = jnp.asarray(np.random.default_rng(0).normal(size=(100, 700)).astype(np.float32))
assert kk.softmax.spec["target"] not in jax.jit(kk.softmax).lower(x).as_text()
y = jax.jit(kk.softmax)(x)
assert float(jnp.abs(y - jax.nn.softmax(x, axis=-1)).max()) < 1e-6
try:
    kk.softmax.unchecked(x)
    raise AssertionError("unchecked() ran without a kernel")
except RuntimeError as e:
    assert "no compiler" in str(e), e
print("fallback ok")

# A kernel file changed after the export is never built: said, and the reference is used.
src = kk.vector_add.dir + "/src/kernel.c"
with open(src, "a") as f:
    f.write("\n/* edited */\n")
status = kk.vector_add.status()
assert "src/kernel.c was changed after the export" in status, status
a = jnp.ones((3_000_000,), jnp.float32)
assert float(kk.vector_add(a, a)[0]) == 2.0
print("edited ok")
