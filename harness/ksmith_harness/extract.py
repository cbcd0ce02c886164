"""`ksmith extract`: from a user's jitted JAX function to a suite of kernel tasks.

The function is traced to a jaxpr (calls such as nested `jax.jit` and `custom_jvp` inlined), its
equations are split into parts the way XLA fuses them (each `dot_general` alone; the elementwise,
reduction and layout equations between them grouped into convex fusions), each part is written as
a jax.numpy/lax reference, re-jitted alone on its traced shapes and timed, and the parts are ranked
by time. For the top ones a task directory is written: task.toml (axes from the traced shapes,
workloads at those shapes and nearby ones, input distributions from the sample's values,
tolerances measured against a float64 reference and a plain sequential evaluation) and
reference.py. The binary validates every task with the real `ksmith validate` and drops what fails.

Run as `python -m ksmith_harness.extract --file F --function NAME --out DIR [--top K]
[--example SPEC]`; prints one JSON summary on stdout. Exit 2: the function cannot be loaded or
traced, or has no part worth a kernel (the message says which); exit 1: an unexpected failure.
"""

import argparse
import contextlib
import importlib.util
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from . import sequential

# The user's program is traced, evaluated and timed as the user runs it (JAX's default 32-bit
# mode: `jnp.zeros(n)` stays float32); only the float64 references switch 64-bit mode on.
_x64 = getattr(jax, "enable_x64", None)
if _x64 is None:  # older JAX: the configuration flag, restored afterwards

    @contextlib.contextmanager
    def _x64(on):
        before = jax.config.jax_enable_x64
        jax.config.update("jax_enable_x64", on)
        try:
            yield
        finally:
            jax.config.update("jax_enable_x64", before)


class UserError(Exception):
    """A problem with the user's file, function or example (exit 2)."""


# ---------------------------------------------------------------------------------------------
# Loading the function and its example inputs


_DTYPES = {
    "f32": "float32",
    "f64": "float64",
    "f16": "float16",
    "bf16": "bfloat16",
    "i32": "int32",
    "i64": "int64",
    "i8": "int8",
    "u8": "uint8",
    "bool": "bool",
}


def parse_example(spec):
    """`f32[64,512],f32[512]` -> sample arrays (normal(0, 1) floats, integers in [0, 10))."""
    args = []
    rng = np.random.default_rng(0)
    for item in re.findall(r"([a-z0-9]+)\[([0-9, ]*)\]", spec):
        dt, dims = item
        if dt not in _DTYPES:
            raise UserError(f"--example: unknown dtype `{dt}` (one of {', '.join(_DTYPES)})")
        shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
        name = _DTYPES[dt]
        if name == "bool":
            a = rng.integers(0, 2, shape).astype(bool)
        elif name.startswith(("int", "uint")):
            a = rng.integers(0, 10, shape).astype(name)
        else:
            a = jnp.asarray(rng.standard_normal(shape), dtype=name)
        args.append(a)
    rebuilt = ",".join(f"{d}[{s}]" for d, s in re.findall(r"([a-z0-9]+)\[([0-9, ]*)\]", spec))
    if not args or rebuilt.replace(" ", "") != spec.replace(" ", ""):
        raise UserError(f"--example `{spec}`: expected dtype[dims] items separated by commas, e.g. f32[64,512],f32[512]")
    return tuple(args)


def load(file, function, example):
    path = Path(file)
    if not path.is_file():
        raise UserError(f"{file}: no such file")
    sys.path.insert(0, str(path.resolve().parent))
    spec = importlib.util.spec_from_file_location(f"ksmith_extract_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's module failed to import
        raise UserError(f"{file}: cannot import: {type(e).__name__}: {e}") from e
    fn = getattr(module, function, None)
    if not callable(fn):
        raise UserError(f"{file}: defines no function `{function}`")
    if example:
        return fn, parse_example(example)
    for builder in (f"{function}_example", "example_inputs"):
        b = getattr(module, builder, None)
        if callable(b):
            try:
                args = b()
            except Exception as e:
                raise UserError(f"{file}: {builder}() failed: {type(e).__name__}: {e}") from e
            if not isinstance(args, tuple):
                args = (args,)
            return fn, args
    raise UserError(
        f"{file}: no sample inputs for `{function}`: define `{function}_example()` or `example_inputs()` "
        "returning the argument tuple, or pass --example (e.g. --example 'f32[64,512],f32[512]')"
    )


# ---------------------------------------------------------------------------------------------
# The flat program: equations over numbered values


class Val:
    """A value of the flat program: shape, dtype, and its number (or a literal's value)."""

    def __init__(self, ident, shape, dtype, literal=None):
        self.id, self.shape, self.dtype, self.literal = ident, tuple(shape), np.dtype(dtype), literal


class Eqn:
    def __init__(self, index, prim, params, ins, outs):
        self.index, self.prim, self.params, self.ins, self.outs = index, prim, params, ins, outs

    @property
    def name(self):
        return self.prim.name


_INLINED = sequential._INLINED


def flatten(closed):
    """(input values, constant values with their arrays, equations, output values)."""
    counter = [0]
    eqns = []

    def new(aval):
        counter[0] += 1
        return Val(counter[0], aval.shape, aval.dtype)

    def walk(jaxpr, env):
        def read(v):
            if type(v).__name__ == "Literal":
                val = np.asarray(v.val)
                return Val(0, val.shape, val.dtype, literal=val)
            return env[v]

        for e in jaxpr.eqns:
            ins = [read(v) for v in e.invars]
            body = next((e.params[p] for p in sequential._BODY_PARAMS if p in e.params), None)
            if e.primitive.name in _INLINED and body is not None:
                inner, consts = (body.jaxpr, body.consts) if hasattr(body, "consts") else (body, [])
                sub = {}
                for v, c in zip(inner.constvars, consts, strict=True):
                    val = np.asarray(c)
                    sub[v] = Val(0, val.shape, val.dtype, literal=val)
                for v, a in zip(inner.invars, ins, strict=True):
                    sub[v] = a
                walk(inner, sub)
                for v, o in zip(e.outvars, inner.outvars, strict=True):
                    env[v] = sub[o] if type(o).__name__ != "Literal" else read(o)
                continue
            outs = [new(v.aval) for v in e.outvars]
            for v, o in zip(e.outvars, outs, strict=True):
                env[v] = o
            eqns.append(Eqn(len(eqns), e.primitive, dict(e.params), ins, outs))

    env = {}
    consts = []
    for v, c in zip(closed.jaxpr.constvars, closed.consts, strict=True):
        env[v] = new(v.aval)
        consts.append((env[v], np.asarray(c)))
    inputs = [new(v.aval) for v in closed.jaxpr.invars]
    for v, a in zip(closed.jaxpr.invars, inputs, strict=True):
        env[v] = a
    walk(closed.jaxpr, env)
    outputs = [env[v] if type(v).__name__ != "Literal" else None for v in closed.jaxpr.outvars]
    return inputs, consts, eqns, [o for o in outputs if o is not None]


def evaluate(inputs, consts, eqns, args):
    """Every value of the program on the sample, by number."""
    values = {v.id: np.asarray(a) for v, a in zip(inputs, args, strict=True)}
    values.update({v.id: a for v, a in consts})
    for e in eqns:
        ins = [v.literal if v.id == 0 else values[v.id] for v in e.ins]
        out = e.prim.bind(*ins, **e.params)
        outs = out if e.prim.multiple_results else [out]
        for v, o in zip(e.outs, outs, strict=True):
            values[v.id] = np.asarray(o)
    return values


# ---------------------------------------------------------------------------------------------
# Parts: what XLA would fuse


_ANCHORS = {"dot_general", "conv_general_dilated"}
# Control flow and calls out of XLA: parts of their own (like anchors), never written as tasks.
_OPAQUE = {"scan", "while", "cond", "custom_call", "pure_callback", "io_callback", "shard_map", "xla_pmap"}


def _is_float(dtype):
    return bool(jnp.issubdtype(dtype, jnp.floating))


_LAYOUT = {
    "reshape",
    "transpose",
    "broadcast_in_dim",
    "squeeze",
    "expand_dims",
    "convert_element_type",
    "copy",
    "copy_p",
    "split",
    "slice",
    "concatenate",
    "pad",
    "rev",
}


def partition(eqns):
    """Lists of equations: each anchor alone; the others grouped along producer->consumer edges
    into parts that stay convex (a part whose value an anchor read is closed to later equations,
    so no part depends on itself through an anchor)."""
    part_of = {}  # value id -> part index
    parts = []
    closed = set()
    for e in eqns:
        producers = {part_of[v.id] for v in e.ins if v.id in part_of}
        if e.name in _ANCHORS or e.name in _OPAQUE:
            closed.update(producers)
            parts.append([e])
            closed.add(len(parts) - 1)
            for o in e.outs:
                part_of[o.id] = len(parts) - 1
            continue
        open_ = sorted(p for p in producers if p not in closed and parts[p] is not None)
        if open_:
            target = open_[0]
            for p in open_[1:]:
                parts[target].extend(parts[p])
                for q in parts[p]:
                    for o in q.outs:
                        part_of[o.id] = target
                parts[p] = None
            parts[target].append(e)
        else:
            parts.append([e])
            target = len(parts) - 1
        for o in e.outs:
            part_of[o.id] = target
    return [sorted(p, key=lambda q: q.index) for p in parts if p]


def interface(part, eqns, program_outputs):
    """(input values, output values) of a part."""
    inside = {o.id for e in part for o in e.outs}
    ins, seen = [], set()
    for e in part:
        for v in e.ins:
            if v.id != 0 and v.id not in inside and v.id not in seen:
                seen.add(v.id)
                ins.append(v)
    members = {e.index for e in part}
    used_outside = {v.id for e in eqns if e.index not in members for v in e.ins}
    used_outside |= {v.id for v in program_outputs}
    outs = [o for e in part for o in e.outs if o.id in used_outside]
    return ins, outs


# ---------------------------------------------------------------------------------------------
# A part as reference code


_UNARY = {
    "exp": "jnp.exp",
    "log": "jnp.log",
    "tanh": "jnp.tanh",
    "logistic": "jax.nn.sigmoid",
    "sqrt": "jnp.sqrt",
    "rsqrt": "jax.lax.rsqrt",
    "neg": "jnp.negative",
    "abs": "jnp.abs",
    "sin": "jnp.sin",
    "cos": "jnp.cos",
    "erf": "jax.lax.erf",
    "exp2": "jnp.exp2",
    "log1p": "jnp.log1p",
    "expm1": "jnp.expm1",
    "sign": "jnp.sign",
    "floor": "jnp.floor",
    "ceil": "jnp.ceil",
    "not": "jnp.logical_not",
    "square": "jnp.square",
    "is_finite": "jnp.isfinite",
    "erf_inv": "jax.lax.erf_inv",
    "tan": "jnp.tan",
    "cbrt": "jnp.cbrt",
    "reciprocal": "jnp.reciprocal",
}
_BINARY = {
    "add": "jnp.add",
    "sub": "jnp.subtract",
    "mul": "jnp.multiply",
    "div": "jnp.divide",
    "max": "jnp.maximum",
    "min": "jnp.minimum",
    "pow": "jnp.power",
    "eq": "jnp.equal",
    "ne": "jnp.not_equal",
    "lt": "jnp.less",
    "le": "jnp.less_equal",
    "gt": "jnp.greater",
    "ge": "jnp.greater_equal",
    "and": "jnp.logical_and",
    "or": "jnp.logical_or",
    "atan2": "jnp.arctan2",
    "rem": "jnp.remainder",
    "nextafter": "jnp.nextafter",
}
_REDUCE = {"reduce_sum": "jnp.sum", "reduce_max": "jnp.max", "reduce_min": "jnp.min", "reduce_prod": "jnp.prod"}


class Unsupported(Exception):
    pass


class Emitter:
    """Writes a part's equations as Python lines; shapes are spelled with the task's axes."""

    def __init__(self, axis_of_size):
        self.axis_of_size = axis_of_size
        self.names = {}

    def dim(self, n):
        return self.axis_of_size.get(n, str(n)) if n > 1 else str(n)

    def shape(self, dims, minus_one=False):
        spelled = [self.dim(d) for d in dims]
        if minus_one:
            literal = [i for i, (s, d) in enumerate(zip(spelled, dims, strict=True)) if d > 1 and s == str(d)]
            if len(literal) == 1:
                spelled[literal[0]] = "-1"
        return "(" + ", ".join(spelled) + ")" if len(spelled) != 1 else f"({spelled[0]},)"

    def ref(self, v):
        if v.id == 0:
            val = v.literal
            if val.shape != ():
                raise Unsupported("an array literal")
            if val.dtype == bool:
                return repr(bool(val))
            if np.issubdtype(val.dtype, np.integer):
                return repr(int(val))
            x = float(val)
            if x > 1 and x == int(x) and int(x) in self.axis_of_size:
                # a size as a number (a mean's divisor): follows the axis on other shapes
                return f"float({self.axis_of_size[int(x)]})"
            return repr(x) if math.isfinite(x) else f"float('{x}')"
        return self.names[v.id]

    def line(self, e):
        a = [self.ref(v) for v in e.ins]
        p = e.params
        n = e.name
        if n in _UNARY:
            return f"{_UNARY[n]}({a[0]})"
        if n in _BINARY:
            return f"{_BINARY[n]}({a[0]}, {a[1]})"
        if n in _REDUCE:
            return f"{_REDUCE[n]}({a[0]}, axis={tuple(p['axes'])})"
        if n in ("argmax", "argmin"):
            return f"jnp.{n}({a[0]}, axis={p['axes'][0]}).astype(jnp.{np.dtype(p['index_dtype']).name})"
        if n == "integer_pow":
            return f"jax.lax.integer_pow({a[0]}, {p['y']})"
        if n == "select_n":
            if len(a) == 3:
                return f"jnp.where({a[0]}, {a[2]}, {a[1]})"
            return f"jax.lax.select_n({', '.join(a)})"
        if n == "clamp":
            return f"jnp.clip({a[1]}, {a[0]}, {a[2]})"
        if n == "broadcast_in_dim":
            return f"jax.lax.broadcast_in_dim({a[0]}, {self.shape(p['shape'])}, {tuple(p['broadcast_dimensions'])})"
        if n == "reshape":
            return f"jnp.reshape({a[0]}, {self.shape(p['new_sizes'], minus_one=True)})"
        if n == "transpose":
            return f"jnp.transpose({a[0]}, {tuple(p['permutation'])})"
        if n == "squeeze":
            return f"jax.lax.squeeze({a[0]}, {tuple(p['dimensions'])})"
        if n == "expand_dims":
            return f"jnp.expand_dims({a[0]}, {tuple(p['dimensions'])})"
        if n in ("copy", "copy_p", "optimization_barrier", "stop_gradient"):
            return a[0]
        if n == "convert_element_type":
            new = np.dtype(p["new_dtype"])
            old = e.ins[0].dtype
            if np.issubdtype(new, np.floating) and np.issubdtype(old, np.floating):
                return a[0]  # float to float: the reference keeps the dtype it is run at
            return f"jnp.asarray({a[0]}).astype({'bool' if new.name == 'bool' else 'jnp.' + new.name})"
        if n == "iota":
            return f"jax.lax.broadcasted_iota(jnp.{np.dtype(p['dtype']).name}, {self.shape(p['shape'])}, {p['dimension']})"
        if n == "dot_general":
            (lc, rc), (lb, rb) = p["dimension_numbers"]
            dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
            return f"jax.lax.dot_general({a[0]}, {a[1]}, {dn})"
        if n == "cumsum":
            return f"jax.lax.cumsum({a[0]}, axis={p['axis']}, reverse={p.get('reverse', False)})"
        if n in ("cummax", "cummin"):
            return f"jax.lax.{n}({a[0]}, axis={p['axis']}, reverse={p.get('reverse', False)})"
        if n == "split":
            sizes, axis = list(p["sizes"]), p["axis"]
            if len(set(sizes)) == 1:
                return f"jnp.split({a[0]}, {len(sizes)}, axis={axis})"
            cuts = [sum(sizes[: i + 1]) for i in range(len(sizes) - 1)]
            return f"jnp.split({a[0]}, {cuts}, axis={axis})"
        if n == "reduce_precision":
            return a[0]
        raise Unsupported(f"primitive `{n}`")


# ---------------------------------------------------------------------------------------------
# Timing


def _calibrate(fn, args, min_round_s):
    """Calls per round so that a round takes at least `min_round_s` (after a warm-up)."""
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, min(100000, int(min_round_s / one)))


def _interval(per):
    """(median, low, high) of per-round times: the interval is the order statistics that bracket
    the median with ~95% confidence (binomial), e.g. the 4th and 12th of 15 rounds."""
    per = sorted(per)
    n = len(per)
    k = max(0, int(n / 2 - 1.96 * math.sqrt(n) / 2))
    return statistics.median(per), per[k], per[n - 1 - k]


def time_together(calls, min_round_s=0.005, rounds=15):
    """Times every (fn, args) in the same rounds, interleaved (each round calls each in turn), so
    that drift and neighbours' load hit all of them alike; (median, low, high) seconds per call."""
    reps = [_calibrate(fn, args, min_round_s) for fn, args in calls]
    per = [[] for _ in calls]
    for _ in range(rounds):
        for i, (fn, args) in enumerate(calls):
            t0 = time.perf_counter()
            for _ in range(reps[i]):
                out = fn(*args)
            jax.block_until_ready(out)
            per[i].append((time.perf_counter() - t0) / reps[i])
    return [_interval(p) for p in per], per


# ---------------------------------------------------------------------------------------------
# One part as a task


_AXIS_NAMES = ["M", "N", "K", "L", "P", "Q", "R", "S", "T", "U", "V", "W", "B", "C", "D", "E", "F", "G", "H", "J"]


def _kind(part):
    names = {e.name for e in part}
    if names & _OPAQUE:
        return "control", "other"
    if names & _ANCHORS:
        return "matmul", "matmul"
    reduces = names & set(_REDUCE) | (names & {"argmax", "argmin", "cumsum"})
    if reduces:
        if "exp" in names and "reduce_max" in names:
            return "softmax", "normalization"
        if "rsqrt" in names or ("sqrt" in names and "div" in names):
            return "norm", "normalization"
        if "cumsum" in names:
            return "scan", "scan"
        return ("reduce", "reduction") if len(names - _LAYOUT) <= 2 else ("fused", "fused")
    return "elementwise", "elementwise"


def _flops_term(e, emitter):
    """One equation's FLOPs as an expression over the axes (None: free)."""
    n = e.name
    out = e.outs[0]

    def prod(dims):
        spelled = [emitter.dim(d) for d in dims if d > 1]
        return " * ".join(spelled) if spelled else "1"

    if n == "dot_general":
        (lc, _), _ = e.params["dimension_numbers"]
        k = [e.ins[0].shape[i] for i in lc]
        return "2 * " + prod(list(out.shape) + k)
    if n in _REDUCE or n in ("argmax", "argmin", "cumsum"):
        return prod(e.ins[0].shape)
    if n in _LAYOUT or n == "iota":
        return None
    return prod(out.shape)


def _dist(a, dtype):
    a = np.asarray(a, dtype=np.float64) if _is_float(dtype) else np.asarray(a)
    if dtype.kind == "b":
        return {"dist": "integers", "low": 0, "high": 2}
    if dtype.kind in "iu":
        return {"dist": "integers", "low": int(a.min()), "high": int(a.max()) + 1}
    if a.size == 0 or not np.all(np.isfinite(a)):
        return {"dist": "normal", "mean": 0.0, "std": 1.0}
    lo, hi, mean, std = float(a.min()), float(a.max()), float(a.mean()), float(a.std())
    scale = max(abs(mean), 1.0)
    if std < 1e-6 * scale:
        # A constant in the sample (a norm's scale of ones, a bias of zeros): drawn around it, so
        # that a kernel ignoring the input cannot pass.
        return {"dist": "normal", "mean": mean, "std": max(0.1 * abs(mean), 0.1)}
    if lo >= 0.0:
        return {"dist": "uniform", "low": lo, "high": hi if hi > lo else lo + 1.0}
    return {"dist": "normal", "mean": mean, "std": std}


def _draw(d, shape, dtype, rng):
    if d["dist"] == "integers":
        return rng.integers(d["low"], d["high"], shape).astype(dtype)
    if d["dist"] == "uniform":
        return np.asarray(rng.uniform(d["low"], d["high"], shape)).astype(dtype)
    return np.asarray(rng.normal(d["mean"], d["std"], shape)).astype(dtype)


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "0.0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return "[" + ", ".join(_toml_value(x) for x in v) + "]"


_BASE_RTOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}


class Part:
    """One part: its equations, interface, reference source and what it measured."""

    def __init__(self, eqns, ins, outs):
        self.eqns, self.ins, self.outs = eqns, ins, outs
        self.kind, self.op_class = _kind(eqns)
        self.skip = None
        self.time = None
        self.source = None
        self.fn = None

    def describe(self):
        names = [e.name for e in self.eqns if e.name not in _LAYOUT] or [e.name for e in self.eqns]
        return " ".join(names[:12]) + (" ..." if len(names) > 12 else "")

    def build(self):
        opaque = sorted({e.name for e in self.eqns} & _OPAQUE)
        if opaque:
            self.skip = f"control flow or a call out of XLA ({', '.join(opaque)}): not split into parts"
            return
        if all(e.name in _LAYOUT or e.name == "iota" for e in self.eqns):
            self.skip = "layout only (XLA folds it into its neighbours)"
            return
        if any(np.dtype(v.dtype).kind == "c" for v in self.ins + self.outs):
            self.skip = "complex values"
            return
        sizes = []
        for v in self.ins + self.outs:
            for d in v.shape:
                if d > 1 and d not in sizes:
                    sizes.append(d)
        if len(sizes) > len(_AXIS_NAMES):
            self.skip = "too many distinct dimensions"
            return
        self.axis_of_size = {s: _AXIS_NAMES[i] for i, s in enumerate(sizes)}
        self.input_names = [f"x{i}" for i in range(len(self.ins))]
        em = Emitter(self.axis_of_size)
        for v, nm in zip(self.ins, self.input_names, strict=True):
            em.names[v.id] = nm
        lines = []
        derived = set()
        for s, ax in self.axis_of_size.items():
            for v, nm in zip(self.ins, self.input_names, strict=True):
                if s in v.shape:
                    lines.append(f"    {ax} = {nm}.shape[{v.shape.index(s)}]")
                    derived.add(ax)
                    break
        # Sizes no input carries stay literal in the code (a const axis in task.toml).
        self.const_axes = {ax: s for s, ax in self.axis_of_size.items() if ax not in derived}
        em.axis_of_size = {s: ax for s, ax in self.axis_of_size.items() if ax in derived}
        count = 0
        try:
            for e in self.eqns:
                expr = em.line(e)
                names = []
                for o in e.outs:
                    count += 1
                    names.append(f"t{count}")
                    em.names[o.id] = names[-1]
                lines.append(f"    {names[0] if len(names) == 1 else ', '.join(names)} = {expr}")
        except Unsupported as u:
            self.skip = f"cannot be written as a reference: {u}"
            return
        rets = [em.names[o.id] for o in self.outs]
        lines.append(f"    return {rets[0]}" if len(rets) == 1 else f"    return {', '.join(rets)}")
        self.emitter = em
        self.body = lines
        self.source = f"import jax\nimport jax.numpy as jnp\n\n\ndef reference({', '.join(self.input_names)}):\n" + "\n".join(lines) + "\n"
        scope = {}
        try:
            exec(compile(self.source, "<reference>", "exec"), scope)
        except SyntaxError as e:
            self.skip = f"cannot be written as a reference: {e}"
            return
        self.fn = scope["reference"]
        counts = {}
        for t in (_flops_term(e, em) for e in self.eqns):
            if t:
                counts[t] = counts.get(t, 0) + 1
        self.flops = " + ".join(t if c == 1 else f"{c} * {t}" for t, c in counts.items()) or "1"

    def shapes_at(self, axes):
        """Every input's shape with the var axes set to `axes` (name -> size)."""
        size_of = {**{ax: s for s, ax in self.axis_of_size.items()}, **axes}
        inv = dict(self.axis_of_size)
        return [tuple(size_of[inv[d]] if d in inv else d for d in v.shape) for v in self.ins]

    def fits(self, axes):
        """Whether the reference traces at these axes, and the output shapes it gives."""
        structs = [jax.ShapeDtypeStruct(s, v.dtype) for s, v in zip(self.shapes_at(axes), self.ins, strict=True)]
        try:
            outs = jax.eval_shape(self.fn, *structs)
        except Exception:
            return None
        return outs if isinstance(outs, tuple) else (outs,)


def _nearby(part):
    """Var-axis settings near the traced ones (each checked to trace): a smaller size on every
    axis, odd sizes that leave tails, and a small interpret-sized one."""
    var = {ax: s for s, ax in part.axis_of_size.items() if ax not in part.const_axes}
    traced = dict(var)
    cands = []

    def shrink(s, f, odd):
        t = max(1, int(s * f))
        if odd and t > 2:
            t = t - 1 if t % 2 == 0 else t
        return t

    cands.append({ax: shrink(s, 0.75, False) for ax, s in var.items()})
    cands.append({ax: shrink(s, 0.6, True) for ax, s in var.items()})
    for ax, s in var.items():
        c = dict(traced)
        c[ax] = shrink(s, 0.8, True) if s > 8 else s + 1
        cands.append(c)
    out = []
    for c in cands:
        if c != traced and c not in out and part.fits(c) is not None:
            out.append(c)
    return traced, out[:3]


def _interpret_axes(part, traced):
    """Axes scaled down so that the largest tensor has at most ~32K elements."""
    biggest = max((math.prod(s) for s in part.shapes_at(traced)), default=1)
    if biggest <= 32768:
        return None
    f = (32768 / biggest) ** (1 / max(1, len(traced)))
    c = {ax: max(1, int(s * f)) for ax, s in traced.items()}
    return c if part.fits(c) is not None and c != traced else None


def _tolerances(part, dists, axes_list, dtypes_out):
    """Per output (atol, rtol): the errors of the reference at the task's dtype (XLA) and of a
    plain sequential evaluation, against float64, over two draws on every workload, times 4;
    None when an output is not accurate enough at its dtype to be tested meaningfully."""
    worst = [0.0] * len(part.outs)
    rms = [math.inf] * len(part.outs)
    rtols = [_BASE_RTOL.get(d, 1e-5) for d in dtypes_out]
    for axes in axes_list:
        shapes = part.shapes_at(axes)
        for seed in (1, 2):
            rng = np.random.default_rng(seed)
            arrays = [_draw(d, s, v.dtype, rng) for d, s, v in zip(dists, shapes, part.ins, strict=True)]
            low = [jnp.asarray(a, dtype=v.dtype) for a, v in zip(arrays, part.ins, strict=True)]
            with _x64(True):
                wide64 = [jnp.asarray(a, dtype=np.float64) if _is_float(v.dtype) else jnp.asarray(a) for a, v in zip(arrays, part.ins, strict=True)]
                ref = [np.asarray(o, dtype=np.float64) for o in _as_tuple(part.fn(*wide64))]
            cands = [[np.asarray(o, dtype=np.float64) for o in _as_tuple(jax.jit(part.fn)(*low))]]
            try:
                seq, _ = sequential.evaluate(part.fn, low)
                cands.append([np.asarray(o, dtype=np.float64) for o in seq])
            except Exception:  # a reference the sequential evaluator cannot follow
                pass
            for i, r in enumerate(ref):
                if not np.issubdtype(r.dtype, np.floating) or not _is_float(part.outs[i].dtype):
                    continue
                rms[i] = min(rms[i], float(np.sqrt(np.mean(np.square(r)))) if r.size else 0.0)
                for c in cands:
                    err = np.abs(c[i] - r) - rtols[i] * np.abs(r)
                    err = err[np.isfinite(err)]
                    if err.size:
                        worst[i] = max(worst[i], float(err.max()))
    result = []
    for i in range(len(part.outs)):
        if not math.isfinite(rms[i]):
            result.append((0.0, 0.0))
            continue
        atol = max(4 * worst[i], 1e-6 * rms[i], 1e-30)
        if atol + rtols[i] * rms[i] > 0.03 * rms[i]:
            return None
        result.append((float(f"{atol:.3g}"), rtols[i]))
    return result


def _as_tuple(x):
    return x if isinstance(x, tuple | list) else (x,)


def write_task(part, name, values, out_dir, program_file, function):
    dists = [_dist(values[v.id], v.dtype) if v.id in values else {"dist": "normal", "mean": 0.0, "std": 1.0} for v in part.ins]
    traced, nearby = _nearby(part)
    interp = _interpret_axes(part, traced)
    dtypes_out = [np.dtype(o.dtype).name for o in part.outs]
    tols = _tolerances(part, dists, [traced, *nearby], dtypes_out)
    if tols is None:
        return "not accurate enough at its dtype for a meaningful tolerance (error above 3% of the output's RMS)"
    em = part.emitter

    def spelled(v):
        return [em.dim(d) if d > 1 else 1 for d in v.shape]

    def shape_toml(v):
        return "[" + ", ".join(json.dumps(s) if isinstance(s, str) else str(s) for s in spelled(v)) + "]"

    bytes_terms = []
    for v in part.ins + part.outs:
        dims = [em.dim(d) for d in v.shape if d > 1]
        bytes_terms.append(" * ".join([str(np.dtype(v.dtype).itemsize), *dims]))
    lines = [
        f"name = {json.dumps(name)}",
        f"description = {json.dumps(f'Extracted from {program_file}:{function} by ksmith extract: ' + part.describe())}",
        f"op_class = {json.dumps(part.op_class)}",
        f"flops = {json.dumps(part.flops)}",
        f"bytes = {json.dumps(' + '.join(bytes_terms))}",
        "",
        "[axes]",
    ]
    for s, ax in part.axis_of_size.items():
        if ax in part.const_axes:
            lines.append(f'{ax} = {{ kind = "const", value = {s} }}')
        else:
            lines.append(f'{ax} = {{ kind = "var" }}')
    for v, nm in zip(part.ins, part.input_names, strict=True):
        lines += ["", "[[inputs]]", f"name = {json.dumps(nm)}", f"shape = {shape_toml(v)}", f"dtype = {json.dumps(np.dtype(v.dtype).name)}"]
    lines.append("")
    lines.append("# Tolerances: 4x the worst error, against a float64 reference, of this reference run at the")
    lines.append("# task's dtype by XLA and of a plain sequential evaluation (every sum in order), over two")
    lines.append("# draws on every workload.")
    for i, o in enumerate(part.outs):
        atol, rtol = tols[i]
        lines += ["[[outputs]]", f'name = "y{i}"', f"shape = {shape_toml(o)}", f"dtype = {json.dumps(dtypes_out[i])}"]
        if _is_float(o.dtype):
            lines += [f"atol = {atol!r}", f"rtol = {rtol!r}"]
        lines.append("")
    workloads = [("traced shapes", "cpu", traced)] + [("nearby shapes (held out from the trace)", "cpu", a) for a in nearby]
    if interp is not None:
        workloads.append(("interpreter-sized", "interpret", interp))
    for what, set_, axes in workloads:
        lines.append(f"# {what}")
        lines.append("[[workloads]]")
        if set_ != "cpu":
            lines.append(f'set = "{set_}"')
        lines.append(f"axes = {_toml_value(axes)}")
        lines.append("[workloads.inputs]")
        for nm, d in zip(part.input_names, dists, strict=True):
            lines.append(f"{nm} = {_toml_value(d)}")
        lines.append("")
    d = out_dir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text("\n".join(lines))
    (d / "reference.py").write_text(part.source)
    return None


# ---------------------------------------------------------------------------------------------


def extract(args):
    fn, sample, _, _, (inputs, consts, eqns, outputs) = _program(args)
    leaves = jax.tree_util.tree_leaves(sample)
    if len(leaves) != len(inputs):
        raise UserError(f"{args.file}:{args.function}: the sample has {len(leaves)} arrays, the trace {len(inputs)}")
    control = sorted({e.name for e in eqns if e.name in ("scan", "while", "cond", "custom_call", "pure_callback")})
    values = evaluate(inputs, consts, eqns, leaves)
    parts = []
    for p in partition(eqns):
        ins, outs = interface(p, eqns, outputs)
        if not outs:
            continue
        part = Part(p, ins, outs)
        part.build()
        parts.append(part)
    # The program, a trivial call (the floor) and every part, timed in the same rounds.
    calls = [(jax.jit(fn), sample), (jax.jit(lambda x: x + 1), (jnp.zeros((), jnp.float32),))]
    timed = []
    for part in parts:
        if part.skip:
            continue
        part_args = [jnp.asarray(values[v.id]) for v in part.ins]
        f = jax.jit(part.fn)
        try:
            jax.block_until_ready(f(*part_args))
        except Exception as e:
            part.skip = f"its reference fails on the traced values: {type(e).__name__}"
            continue
        calls.append((f, part_args))
        timed.append(part)
    times, _ = time_together(calls)
    (total, total_lo, total_hi), (floor, _, _) = times[0], times[1]
    for part, t in zip(timed, times[2:], strict=True):
        part.time = t
        if t[0] < 1.5 * floor:
            part.skip = f"too small to be worth a kernel ({t[0] * 1e6:.1f} us; a jit call alone takes {floor * 1e6:.1f} us)"
        elif t[0] < 0.01 * total:
            part.skip = f"under 1% of the program's time ({t[0] * 1e6:.1f} us)"
    ranked = sorted((p for p in parts if not p.skip), key=lambda p: -p.time[0])
    out_dir = Path(args.out)
    written = []
    stem = re.sub(r"[^a-z0-9_]", "_", args.function.lower())
    if stem[:1].isdigit():
        stem = "f_" + stem
    for part in ranked:
        if len(written) >= args.top:
            break
        name = f"{stem}_{len(written) + 1}_{part.kind}"
        if (out_dir / name).exists():
            raise UserError(f"{out_dir / name}: already exists; extract into a new --out directory")
        why = write_task(part, name, values, out_dir, Path(args.file).name, args.function)
        if why:
            part.skip = why
            continue
        part.task = name
        written.append(part)
    summary = {
        "example": args.example,
        "program": {"file": args.file, "function": args.function, "median_s": total, "low_s": total_lo, "high_s": total_hi},
        "jit_call_floor_s": floor,
        "control_flow": control,
        "xla_ops": xla_ops(fn, sample),
        "parts": [
            {
                "task": getattr(p, "task", None),
                "kind": p.kind,
                "ops": p.describe(),
                "inputs": [[list(v.shape), np.dtype(v.dtype).name] for v in p.ins],
                "outputs": [[list(v.shape), np.dtype(v.dtype).name] for v in p.outs],
                "median_s": p.time[0] if p.time else None,
                "low_s": p.time[1] if p.time else None,
                "high_s": p.time[2] if p.time else None,
                "skipped": p.skip,
            }
            for p in sorted(parts, key=lambda p: -(p.time[0] if p.time else 0.0))
        ],
    }
    return summary


_HLO_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def xla_ops(fn, sample):
    """Opcode counts of the compiled program's entry computation (fusions, dots, custom calls...):
    what XLA made of the function, beside the parts found in the jaxpr."""
    try:
        text = jax.jit(fn).lower(*sample).compile().as_text()
    except Exception:  # the compiled text is a cross-check, not needed for extraction
        return {}
    counts, entry = {}, False
    for line in text.splitlines():
        if line.startswith("ENTRY"):
            entry = True
            continue
        if entry and line.startswith("}"):
            break
        if entry and "=" in line:
            m = re.search(r"\b([a-z][a-z0-9-]*)\(", line.split("=", 1)[1])
            if m and m.group(1) not in _HLO_FREE:
                kind = re.search(r"kind=k(\w+)", line)
                op = f"{m.group(1)} ({kind.group(1).lower()})" if kind else m.group(1)
                counts[op] = counts.get(op, 0) + 1
    return counts


def _program(args):
    """(fn, sample, flat program, parts) of the user's function."""
    fn, sample = load(args.file, args.function, args.example)
    try:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*sample)
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise UserError(f"{args.file}:{args.function}: cannot be traced with jax: {type(e).__name__}: {first}") from e
    flat = flatten(closed)
    return fn, sample, closed, out_shape, flat


def _ratio(plain, other):
    """(median, low, high) of per-round plain/other ratios (same rounds, paired)."""
    return _interval([a / b for a, b in zip(plain, other, strict=True)])


def measure(args):
    """The user's function as given and with the exported kernels substituted for the parts
    that became tasks, timed in the same rounds; per part, its plain jit against the kernel."""
    suite = Path(args.suite)
    fn, sample, closed, out_shape, (inputs, consts, eqns, outputs) = _program(args)
    leaves = jax.tree_util.tree_leaves(sample)
    values = evaluate(inputs, consts, eqns, leaves)
    parts = []
    for p in partition(eqns):
        ins, outs = interface(p, eqns, outputs)
        if outs:
            part = Part(p, ins, outs)
            part.build()
            if part.source:
                parts.append(part)
    export = Path(args.export).resolve()
    sys.path.insert(0, str(export))
    try:
        kk = importlib.import_module(args.package)
    except Exception as e:
        raise UserError(f"{export}: cannot import the package `{args.package}`: {type(e).__name__}: {e}") from e
    manifest = json.loads((export / args.package / "manifest.json").read_text())
    exported = set(manifest.get("kernels", {}))
    # A task's part is found by its reference: the same source, from the same program.
    by_source = {p.source: p for p in parts}
    rows, subst = [], {}
    for task_dir in sorted(d for d in suite.iterdir() if (d / "reference.py").is_file()):
        name = task_dir.name
        part = by_source.get((task_dir / "reference.py").read_text())
        row = {"task": name, "substituted": False}
        rows.append(row)
        if part is None:
            row["why_not"] = "no part of the program has this task's reference now (the program changed since extract)"
            continue
        if name not in exported:
            row["why_not"] = "not in the export (no passed evaluation to export)"
            continue
        wrapped = kk.apply(name)(part.fn)
        part_args = [jnp.asarray(values[v.id]) for v in part.ins]
        why = wrapped.why_not(*part_args)
        row["why_not"] = why
        row["substituted"] = why is None
        if why is None:
            subst[id(part)] = (part, wrapped, part_args)
    if not subst:
        reasons = "; ".join(f"{r['task']}: {r['why_not']}" for r in rows) or "the suite has no tasks"
        raise UserError(f"{args.export}: no kernel of the export can stand in for a part of the program ({reasons})")
    member = {e.index: subst[id(p)] for p in (x[0] for x in subst.values()) for e in p.eqns}
    out_tree = jax.tree_util.tree_structure(out_shape)

    def substituted(*call_args):
        env = {v.id: a for v, a in zip(inputs, jax.tree_util.tree_leaves(call_args), strict=True)}
        env.update({v.id: jnp.asarray(a) for v, a in consts})

        def read(v):
            return v.literal if v.id == 0 else env[v.id]

        pending = list(eqns)
        done_parts = set()
        while pending:
            for i, e in enumerate(pending):
                unit = member.get(e.index)
                if unit is None:
                    if all(v.id == 0 or v.id in env for v in e.ins):
                        out = e.prim.bind(*[read(v) for v in e.ins], **e.params)
                        for v, o in zip(e.outs, out if e.prim.multiple_results else [out], strict=True):
                            env[v.id] = o
                        del pending[i]
                        break
                    continue
                part, wrapped, _ = unit
                if id(part) in done_parts:
                    del pending[i]
                    break
                if all(v.id in env for v in part.ins):
                    outs = _as_tuple(wrapped(*[env[v.id] for v in part.ins]))
                    for v, o in zip(part.outs, outs, strict=True):
                        env[v.id] = o
                    done_parts.add(id(part))
                    del pending[i]
                    break
            else:
                raise RuntimeError("the substituted program cannot be scheduled")
        flat_out = [env[v.id] if v.id else v.literal for v in _out_vals(closed, outputs)]
        return jax.tree_util.tree_unflatten(out_tree, flat_out)

    plain_fn, subst_fn = jax.jit(fn), jax.jit(substituted)
    want = [np.asarray(o, dtype=np.float64) for o in jax.tree_util.tree_leaves(plain_fn(*sample))]
    got = [np.asarray(o, dtype=np.float64) for o in jax.tree_util.tree_leaves(subst_fn(*sample))]
    diff = max((float(np.max(np.abs(a - b))) if a.size else 0.0) for a, b in zip(want, got, strict=True))
    scale = max((float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0) for a in want)
    calls = [(plain_fn, sample), (subst_fn, sample)]
    units = list(subst.values())
    for part, wrapped, part_args in units:
        calls += [(jax.jit(part.fn), part_args), (jax.jit(wrapped), part_args)]
    times, per = time_together(calls, rounds=args.rounds)
    by_task = {}
    for j, (part, _, _) in enumerate(units):
        a, b = 2 + 2 * j, 3 + 2 * j
        by_task[id(part)] = {"plain": _triple(times[a]), "kernel": _triple(times[b]), "speedup": _triple(_ratio(per[a], per[b]))}
    for row in rows:
        part = next((p for p, _, _ in units if row["substituted"] and p.source == (suite / row["task"] / "reference.py").read_text()), None)
        if part is not None:
            row.update(by_task[id(part)])
    return {
        "program": {"file": args.file, "function": args.function},
        "plain": _triple(times[0]),
        "substituted": _triple(times[1]),
        "speedup": _triple(_ratio(per[0], per[1])),
        "rounds": args.rounds,
        "max_abs_diff": diff,
        "output_rms": scale,
        "parts": rows,
    }


def _triple(t):
    return {"median_s": t[0], "low_s": t[1], "high_s": t[2]}


def _out_vals(closed, outputs):
    """The program's output values in order (literal outputs as literal values)."""
    out, it = [], iter(outputs)
    for v in closed.jaxpr.outvars:
        if type(v).__name__ == "Literal":
            val = np.asarray(v.val)
            out.append(Val(0, val.shape, val.dtype, literal=val))
        else:
            out.append(next(it))
    return out


def main():
    ap = argparse.ArgumentParser(prog="ksmith_harness.extract")
    ap.add_argument("--file", required=True)
    ap.add_argument("--function", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--example", default=None)
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--suite", default=None)
    ap.add_argument("--export", default=None)
    ap.add_argument("--package", default=None)
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    try:
        summary = measure(args) if args.measure else extract(args)
    except UserError as e:
        print(str(e), file=sys.stderr)
        sys.exit(2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
