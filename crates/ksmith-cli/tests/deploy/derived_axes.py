"""Run by tests/deploy.rs on an export holding conv2d_scaling_min, whose output sizes HO and WO
appear in no input's shape: they come from the reference, and a keyword that disagrees is an
error (it would make the kernel read past its inputs), never a call."""

import jax
import jax.numpy as jnp
import ksmith_kernels as kk
import numpy as np

k = kk.conv2d_scaling_min
axes = k.spec["workloads"][1]["axes"]
rng = np.random.default_rng(0)
args = [jnp.asarray(rng.normal(size=[axes[a] for a in s["shape"]]).astype(np.float32)) for s in k.inputs]

assert k.why_not(*args) is None, k.why_not(*args)
got = jax.jit(k)(*args)
assert got.shape == (axes["B"], 1, axes["HO"], axes["WO"]), got.shape
with jax.enable_x64(True):
    ref = np.asarray(k.reference(*[jnp.asarray(np.asarray(a, dtype=np.float64)) for a in args]))
assert np.abs(np.asarray(got, dtype=np.float64) - ref).max() < 1e-3

# A keyword that agrees is accepted; one that does not is an error, for unchecked calls too.
k(*args, HO=axes["HO"])
for call in (k, k.unchecked):
    try:
        call(*args, HO=axes["HO"] + 11, WO=axes["WO"] + 11)
        raise AssertionError("a wrong derived axis was accepted")
    except ValueError as e:
        assert f"HO={axes['HO'] + 11}" in str(e), e


# The decorator needs no keywords: the kernel is used.
@kk.apply("conv2d_scaling_min")
def mine(x, w, cb, scale):
    raise AssertionError("the kernel should have been used")


assert k.spec["target"] in jax.jit(mine).lower(*args).as_text()
print("derived axes ok")
