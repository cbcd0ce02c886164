"""The reference as a plain sequential kernel would compute it: every sum accumulated in float32,
one term at a time, in order (what a straightforward C loop does).

`ksmith validate` checks that this passes the task's tolerance: XLA's own float32 reductions and
scans are tree-shaped and far more accurate than a running sum, so a tolerance that XLA meets can
still reject every simple, correct kernel (scans and long reductions). Everything but the sums
(`reduce_sum`, `cumsum`, `dot_general`) is evaluated by JAX itself at the task's dtypes.
"""

import jax
import numpy as np

# Call-like primitives whose body is inlined (control flow such as scan or while is left to JAX).
_INLINED = {
    "pjit",
    "jit",
    "closed_call",
    "core_call",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
    "checkpoint",
    "remat",
}
_BODY_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
# Above this many multiply-adds a dot is left to JAX (the loop over K would take minutes).
_MAX_DOT_WORK = 4e8


class Unsupported(Exception):
    """The reference uses something this evaluator cannot follow."""


def evaluate(fn, args):
    """(outputs, whether any sum was evaluated sequentially) of `fn(*args)`."""
    closed = jax.make_jaxpr(fn)(*args)
    used = [False]
    outs = _run(closed.jaxpr, closed.consts, [np.asarray(a) for a in jax.tree_util.tree_leaves(args)], used)
    return [np.asarray(o) for o in outs], used[0]


def _run(jaxpr, consts, args, used):
    env = {}

    def read(v):
        return v.val if type(v).__name__ == "Literal" else env[v]

    for v, c in zip(jaxpr.constvars, consts, strict=True):
        env[v] = c
    for v, a in zip(jaxpr.invars, args, strict=True):
        env[v] = a
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        outs = _eqn(eqn, ins, used)
        for v, o in zip(eqn.outvars, outs, strict=True):
            env[v] = o
    return [read(v) for v in jaxpr.outvars]


def _eqn(eqn, ins, used):
    name = eqn.primitive.name
    if name in _INLINED:
        body = next((eqn.params[p] for p in _BODY_PARAMS if p in eqn.params), None)
        if body is not None:
            inner, consts = (body.jaxpr, body.consts) if hasattr(body, "consts") else (body, [])
            return _run(inner, consts, ins, used)
    out_dtype = eqn.outvars[0].aval.dtype if eqn.outvars else None
    seq = None
    if name == "reduce_sum" and _floating(ins[0]):
        seq = _reduce_sum(ins[0], eqn.params["axes"])
    elif name == "cumsum" and _floating(ins[0]):
        seq = _cumsum(ins[0], eqn.params["axis"], eqn.params.get("reverse", False))
    elif name == "dot_general" and _floating(ins[0]) and _floating(ins[1]):
        seq = _dot(ins[0], ins[1], eqn.params["dimension_numbers"])
    if seq is not None:
        used[0] = True
        return [seq.astype(out_dtype)]
    out = eqn.primitive.bind(*ins, **eqn.params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _floating(x):
    return np.issubdtype(np.asarray(x).dtype, np.floating) or str(np.asarray(x).dtype) == "bfloat16"


def _f32(x):
    return np.asarray(x).astype(np.float32)


def _reduce_sum(x, axes):
    x = _f32(x)
    axes = tuple(sorted(axes))
    if not axes:
        return x
    rest = [d for i, d in enumerate(x.shape) if i not in axes]
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim)).reshape(*rest, -1)
    if moved.shape[-1] == 0:
        return np.zeros(rest, np.float32)
    # np.cumsum (add.accumulate) adds in order; np.sum would add pairwise.
    return np.cumsum(moved, axis=-1, dtype=np.float32)[..., -1]


def _cumsum(x, axis, reverse):
    x = _f32(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=np.float32), axis)
    return np.cumsum(x, axis=axis, dtype=np.float32)


def _dot(lhs, rhs, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = _f32(lhs), _f32(rhs)
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    shape_b = [lhs.shape[i] for i in lb]
    shape_m = [lhs.shape[i] for i in lf]
    shape_n = [rhs.shape[i] for i in rf]
    b, m, n = (int(np.prod(s)) for s in (shape_b, shape_m, shape_n))
    k = int(np.prod([lhs.shape[i] for i in lc]))
    if b * m * n * k > _MAX_DOT_WORK:
        return None
    a = np.transpose(lhs, [*lb, *lf, *lc]).reshape(b, m, k)
    c = np.transpose(rhs, [*rb, *rc, *rf]).reshape(b, k, n)
    acc = np.zeros((b, m, n), np.float32)
    for i in range(k):
        acc += a[:, :, i, None] * c[:, None, i, :]
    return acc.reshape(*shape_b, *shape_m, *shape_n)
