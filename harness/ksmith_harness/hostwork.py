"""What a Python candidate's host code computes outside its kernels, found in the runner.

The AST policy (policy.py) refuses library math by name; plain operators and methods (`a * b`,
`.sum()`) pass it, and `(a[:, :, None] * b[None, :, :]).sum(1)` before a copying kernel is a
matmul done by XLA, not by the candidate. This module looks at what the host code does instead
of what it names:
- Pallas: the entry function is traced on the workload's abstract shapes (as the runner's
  `jax.jit` traces it for the calls, checked and timed: the same Python on the same shapes) and
  its jaxpr is walked outside the kernels (`pallas_call`'s kernel jaxpr is never entered; `jit`, `cond`,
  `while`, `scan`, `custom_jvp`/`custom_vjp` and other sub-jaxprs are). Values derived from the
  inputs or from a kernel's outputs are "task data"; a primitive outside the allow-list of
  layout and data-movement primitives applied to task data is host work, counted in elements
  (the largest operand or result, times a scan's length; unbounded inside a `while`). Work on
  values that do not depend on the inputs (iota masks, index tables, grid sizes) is free.
- Triton in the interpreter: the tensors the entry gets are `pykernels.NumpyTensor`s, which
  support no arithmetic; every operator, numpy ufunc or function, torch function and math
  method applied to one is reported here (`trip`) instead of failing as an exception.
- Triton on a GPU (`gpukernels`): a torch function mode around the entry during correctness
  calls counts the torch calls that compute on the entry's tensors or on what was derived from
  them, as for Pallas.
A little host work stays allowed (the last step of a two-stage reduction, scalar inputs
prepared): `allowance` elements per call, tied to the workload's largest tensor.

This runs in the candidate's own process: it is a check of honest-looking host compute (what
an LLM writes), not a boundary against a candidate that subverts the runner (docs/judge.md).
"""

import math
import os
import sys

# Host work allowed per call: the largest tensor's elements / ALLOWANCE_DIVISOR, at least
# ALLOWANCE_FLOOR elements.
ALLOWANCE_DIVISOR = 64
ALLOWANCE_FLOOR = 64
# Findings reported per workload (the largest first).
MAX_FINDINGS = 3

# Primitives that move, reshape, select or re-type data without computing on it.
MOVEMENT = frozenset(
    {
        "reshape",
        "squeeze",
        "broadcast_in_dim",
        "broadcast_to",
        "transpose",
        "rev",
        "slice",
        "dynamic_slice",
        "dynamic_update_slice",
        "gather",
        "scatter",
        "concatenate",
        "pad",
        "split",
        "stack",
        "unstack",
        "tile",
        "select_n",
        "convert_element_type",
        "bitcast_convert_type",
        "copy",
        "copy_p",
        "device_put",
        "sharding_constraint",
        "reshard",
        "layout_constraint",
        "optimization_barrier",
        "stop_gradient",
        "iota",
        "empty",
        "zeros_like",
        "pvary",
        "multiple_of",
    }
)
# Kernel launches: their bodies are the candidate's work and are never entered; their outputs
# are task data.
KERNELS = frozenset({"pallas_call", "core_map", "mpmd_map", "triton_kernel_call"})
# Reads of mutable references: conservatively task data (a reference may hold anything).
REF_READS = frozenset({"get", "swap", "freeze"})


def allowance(shapes):
    """Elements of host work allowed per call, for a workload with tensors of `shapes`."""
    largest = max((math.prod(s) for s in shapes), default=0)
    return max(ALLOWANCE_FLOOR, largest // ALLOWANCE_DIVISOR)


def _where(path, module_dir):
    """A candidate file as its solution names it (relative to the module's directory)."""
    try:
        rel = os.path.relpath(path, module_dir)
    except ValueError:
        rel = os.path.basename(path)
    return os.path.basename(path) if rel.startswith("..") else rel


def _in_module(path, module_dir):
    return not os.path.relpath(os.path.abspath(path), module_dir).startswith("..")


def report(ops, total, limit, module_dir, entry_file, inside="inside pallas_call"):
    """Findings ({file, line, message}) for counted host ops [(cost, order, desc, frame, note)]
    whose total exceeds `limit`; none otherwise."""
    if total <= limit:
        return []
    out = []
    for cost, _order, desc, frame, note in sorted(ops, key=lambda o: (-o[0], o[1]))[:MAX_FINDINGS]:
        file, line = frame if frame else (entry_file, 0)
        out.append(
            {
                "file": _where(file, module_dir),
                "line": line,
                "message": (
                    f"host code computes {desc}{note} on data from the inputs or a kernel's outputs, outside the kernels "
                    f"({_count(cost)} elements): that work must happen {inside} "
                    f"(host work per call on this workload: {_count(total)} elements, allowed {limit:,})"
                ),
            }
        )
    return out


def _count(n):
    return "unbounded" if math.isinf(n) else f"{int(n):,}"


# ---------------------------------------------------------------------------------------------
# Pallas: the traced program outside its kernels.


class _Walk:
    """Taint propagation over a jaxpr: which values are task data, and the host ops on them."""

    def __init__(self, module_dir):
        self.module_dir = module_dir
        self.ops = []
        self.total = 0.0
        self.outer = None
        from jax._src import core, source_info_util

        self.core = core
        self.siu = source_info_util

    def jaxpr(self, jaxpr, taint, mult, note, rec):
        env = {}
        for v, t in zip(jaxpr.invars, taint, strict=False):
            env[v] = t
        for eqn in jaxpr.eqns:
            tin = [self._taint(env, v) for v in eqn.invars]
            tout = self.eqn(eqn, tin, mult, note, rec)
            for v, t in zip(eqn.outvars, tout, strict=False):
                env[v] = t
        return [self._taint(env, v) for v in jaxpr.outvars]

    def _taint(self, env, v):
        if isinstance(v, self.core.Literal):
            return False
        return env.get(v, False)

    def _sub(self, j):
        """(jaxpr, closed?) of a Jaxpr or ClosedJaxpr parameter, else None."""
        if isinstance(j, self.core.ClosedJaxpr):
            return j.jaxpr
        if isinstance(j, self.core.Jaxpr):
            return j
        return None

    def eqn(self, eqn, tin, mult, note, rec):
        """Taint of `eqn`'s outputs; its host work recorded in `rec` (None: not recorded). Ops
        inside a sub-jaxpr whose own source has no frame of the candidate's (jax.nn's bodies)
        are placed at the enclosing equation's line."""
        outer = self.outer
        if eqn.params and any(self._sub(v) is not None for v in _flat(eqn.params.values())):
            self.outer = self._frame(eqn) or outer
        try:
            return self._eqn(eqn, tin, mult, note, rec)
        finally:
            self.outer = outer

    def _eqn(self, eqn, tin, mult, note, rec):
        name = eqn.primitive.name
        nout = len(eqn.outvars)
        any_t = any(tin)
        if name in KERNELS:
            return [True] * nout
        if name in REF_READS:
            return [True] * nout
        p = eqn.params
        if name == "cond":
            outs = [tin[0]] * nout
            for branch in p["branches"]:
                got = self.jaxpr(self._sub(branch), tin[1:], mult, note, rec)
                outs = [a or b for a, b in zip(outs, got, strict=False)]
            return outs
        if name == "while":
            cn, bn = p["cond_nconsts"], p["body_nconsts"]
            cconsts, bconsts, carry = tin[:cn], tin[cn : cn + bn], tin[cn + bn :]
            body, cond = self._sub(p["body_jaxpr"]), self._sub(p["cond_jaxpr"])
            carry = self._fixpoint(lambda c: self.jaxpr(body, bconsts + c, 1, note, None), carry)
            loop = " in a while loop (trip count unknown)"
            self.jaxpr(body, bconsts + carry, math.inf, loop, rec)
            self.jaxpr(cond, cconsts + carry, math.inf, loop, rec)
            return carry
        if name == "scan":
            nc, ncarry, length = p["num_consts"], p["num_carry"], p["length"]
            consts, carry, xs = tin[:nc], tin[nc : nc + ncarry], tin[nc + ncarry :]
            body = self._sub(p["jaxpr"])
            carry = self._fixpoint(lambda c: self.jaxpr(body, consts + c + xs, 1, note, None)[:ncarry], carry)
            got = self.jaxpr(body, consts + carry + xs, mult * length, note or f" in a loop of {length} steps", rec)
            return carry + got[ncarry:]
        subs = [s for s in (self._sub(v) for v in _flat(p.values())) if s is not None]
        if subs:
            if len(subs) == 1 and len(subs[0].invars) == len(tin):
                got = self.jaxpr(subs[0], tin, mult, note, rec)
                if len(got) == nout:
                    return got
            for s in subs:
                self.jaxpr(s, [any_t] * len(s.invars), mult, note, rec)
            return [any_t] * nout
        if any_t and name not in MOVEMENT and rec is not None:
            avals = [v.aval for v in eqn.invars] + [v.aval for v in eqn.outvars]
            big = max(avals, key=_numel)
            if _numel(big):
                cost = _numel(big) * mult
                rec.append((cost, len(rec), f"`{name}` ({_short(big)})", self._frame(eqn), note))
                self.total += cost
        return [any_t] * nout

    def _fixpoint(self, step, carry):
        carry = list(carry)
        while True:
            got = step(carry)
            new = [a or b for a, b in zip(carry, got, strict=False)]
            if new == carry:
                return carry
            carry = new

    def _frame(self, eqn):
        """(file, line) of the candidate's code that made `eqn`, or None."""
        try:
            frames = list(self.siu.user_frames(eqn.source_info.traceback))
        except Exception:
            return None
        for f in frames:
            if _in_module(f.file_name, self.module_dir):
                return f.file_name, f.start_line
        return self.outer or ((frames[0].file_name, frames[0].start_line) if frames else None)


def _flat(values):
    for v in values:
        if isinstance(v, tuple | list):
            yield from _flat(v)
        else:
            yield v


def _numel(aval):
    shape = getattr(aval, "shape", None)
    return 0 if shape is None else math.prod(shape)


def _short(aval):
    try:
        return aval.str_short()
    except Exception:
        return str(aval)


def pallas_findings(closed_jaxpr, limit, module_dir, entry_file):
    """Findings for the traced entry (a ClosedJaxpr whose invars are the task's inputs)."""
    w = _Walk(module_dir)
    rec = []
    w.jaxpr(closed_jaxpr.jaxpr, [True] * len(closed_jaxpr.jaxpr.invars), 1, "", rec)
    return report(rec, w.total, limit, module_dir, entry_file)


# ---------------------------------------------------------------------------------------------
# Triton in the interpreter: arithmetic on the adapted tensors.


class HostCompute(Exception):
    """Raised into the candidate's host code when it computes on a task tensor (Triton on the
    interpreter): the adapted tensors cannot do the arithmetic, and the finding is recorded
    before the exception, so catching it changes nothing."""


class Watch:
    """The findings of one call's host code (Triton's interpreter path)."""

    def __init__(self, module_dir, entry_file):
        self.module_dir = module_dir
        self.entry_file = entry_file
        self.found = []

    def trip(self, what, tensor):
        frame = caller(self.module_dir)
        file, line = frame if frame else (self.entry_file, 0)
        if len(self.found) < MAX_FINDINGS:
            self.found.append(
                {
                    "file": _where(file, self.module_dir),
                    "line": line,
                    "message": (
                        f"host code applies {what} to the task tensor {tensor} outside the kernels: "
                        "arithmetic on the inputs or outputs must happen inside a Triton kernel"
                    ),
                }
            )
        raise HostCompute(f"host code applies {what} to the task tensor {tensor} outside the kernels")


def caller(module_dir):
    """(file, line) of the innermost frame of the candidate's code on the stack, or None."""
    f = sys._getframe(1)
    while f is not None:
        if _in_module(f.f_code.co_filename, module_dir):
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return None


WATCH = {}


def watching():
    """The current call's Watch, or None outside a correctness call."""
    return WATCH.get("w")
