"""What the runner finds of host code computing outside the kernels (hostwork.py): Pallas entries
traced and walked (nothing is run), and the Triton interpreter's tensors reporting arithmetic.
Run by trusted_checks.rs with the harness directory on sys.path."""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from ksmith_harness import hostwork, pykernels

HERE = os.path.dirname(os.path.abspath(__file__))
N = 4096
SHAPES = [(N,), (N,), (N,)]


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def partial_kernel(x_ref, o_ref):
    o_ref[...] = jnp.sum(x_ref[...], keepdims=True)


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


def findings(fn, shapes=SHAPES, ins=2):
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes[:ins]]
    return hostwork.pallas_findings(jax.make_jaxpr(fn)(*specs), hostwork.allowance(shapes), HERE, "x.py")


def honest_layout(a, b):
    a = jnp.pad(a, (0, 1024)).astype(jnp.float32)
    return copy(jnp.where(jnp.arange(N + 1024) < N, a, 0.0))[:N].reshape(64, 64).T.reshape(-1)


def honest_two_stage(a, b):
    partials = pl.pallas_call(
        partial_kernel,
        grid=(N // 1024,),
        in_specs=[pl.BlockSpec((1024,), lambda i: (i,))],
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
        out_shape=jax.ShapeDtypeStruct((N // 1024,), a.dtype),
        interpret=True,
    )(a)
    return copy(a), partials.sum() / N


def constant_arithmetic(a, b):
    table = jnp.arange(N, dtype=jnp.float32) * 2.0 + 1.0  # no input in it: free
    return copy(table)


def host_add(a, b):
    return copy(a + b)


def host_matmul(a, b):
    a, b = a.reshape(64, 64), b.reshape(64, 64)
    return copy((a[:, :, None] * b[None, :, :]).sum(1))


def on_kernel_output(a, b):
    return copy(a) * 2.0


def in_helpers(a, b):
    helper = jax.jit(lambda x, y: jax.nn.relu(x) - y)
    return copy(lax.cond(True, helper, lambda x, y: x, a, b))


def in_fori_loop(a, b):
    return copy(lax.fori_loop(0, N, lambda i, c: c.at[i].set(a[i] + b[i]), a))


def in_while_loop(a, b):
    def body(s):
        i, c = s
        return i + 1, c.at[i].set(a[i] * b[i])

    return copy(lax.while_loop(lambda s: s[0] < 3, body, (0, a))[1])


for fn in (honest_layout, honest_two_stage, constant_arithmetic):
    assert findings(fn) == [], (fn.__name__, findings(fn))

for fn, prims in [
    (host_add, ["add"]),
    (host_matmul, ["mul", "reduce_sum"]),
    (on_kernel_output, ["mul"]),
    (in_helpers, ["max", "sub"]),
    (in_fori_loop, ["add"]),
    (in_while_loop, ["mul"]),
]:
    found = findings(fn)
    assert sorted(p for p in prims if any(f"`{p}`" in f["message"] for f in found)) == sorted(prims), (fn.__name__, found)
    assert all(f["file"] == os.path.basename(__file__) and f["line"] > 0 for f in found), found
assert "loop of 4096 steps" in findings(in_fori_loop)[0]["message"]
assert "unbounded" in findings(in_while_loop)[0]["message"]

# Below the allowance (64 elements, or the largest tensor / 64): a small tensor's arithmetic.
assert findings(host_add, [(32,), (32,), (32,)]) == []
assert hostwork.allowance([(64, 64), (4096, 1000)]) == 64000

# Triton on the interpreter: the adapted tensors report arithmetic, in any amount.
a = pykernels.NumpyTensor(np.ones((4, 3), np.float32), "float32", "a")
assert a[:, None].shape == (4, 1, 3) and a.data_ptr() == a.arr.ctypes.data
try:
    a * 2
    raise AssertionError("arithmetic outside a call must fail")
except TypeError:
    pass
for op in (
    lambda: a[:, :, None] * a,
    lambda: 1.0 - a,
    lambda: a.sum(1),
    lambda: np.sum(a),
    lambda: np.exp(a),
    lambda: -a,
    functools.partial(lambda t: t @ t, a),
):
    hostwork.WATCH["w"] = hostwork.Watch(HERE, "x.py")
    try:
        op()
        raise AssertionError("no host compute reported")
    except hostwork.HostCompute:
        pass
    (f,) = hostwork.watching().found
    assert f["file"] == os.path.basename(__file__) and "`a" in f["message"], f
hostwork.WATCH.clear()

print("ok: hostwork")
