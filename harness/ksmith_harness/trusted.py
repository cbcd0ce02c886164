"""Trusted server: inputs, float64 reference outputs (cached on disk), checks, XLA baseline.

Runs only task code (the reference) and our own code; candidates never run here.
"""

import contextlib
import ctypes
import functools
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import re
import stat
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from safetensors.numpy import load_file, save_file

from . import HARNESS_VERSION, PROTOCOL, sequential, tensors
from . import policy as policy_mod
from .protocol import HarnessError, main_loop

# Config updates apply at trace time, so they may follow the imports.
jax.config.update("jax_enable_x64", True)
# References, checks and validation run on the host CPU (float64, deterministic); only the
# baseline of a GPU candidate is timed on the accelerator (`_timing_device`), which this process
# must therefore be able to see.
_CPU = jax.devices("cpu")[0]
jax.config.update("jax_default_device", _CPU)
# Compiled references and baselines persist across processes (keyed by JAX on the program,
# the compiler and the device): a fresh process otherwise compiles the float64 reference and the
# baseline of every workload again, 0.1-0.3 s each. Only this process writes there. No size cap
# (JAX's eviction needs the filelock package): an entry is one program of one task's workload.
if os.environ.get("KSMITH_XLA_CACHE_DIR"):
    jax.config.update("jax_compilation_cache_dir", os.environ["KSMITH_XLA_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

TASKS = {}
# The memory limit (bytes of private writable memory, RLIMIT_DATA) of this process, None when
# unlimited; set by `main` and named in out-of-memory messages.
_MEMORY_LIMIT = None
# Inputs of the workload being timed, as device arrays: (task, workload, seed) -> list.
_DEVICE_INPUTS = {}


class TaskState:
    """A loaded task: its spec, reference module and compiled functions."""

    def __init__(self, spec):
        self.spec = spec
        ref = spec["reference"]
        path = os.path.join(spec["dir"], ref["file"])
        name = f"ksmith_ref_{spec['content_hash'][:16]}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        self.path = path
        if module_spec is None or module_spec.loader is None:
            raise HarnessError(f"{path}: cannot be imported as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        _user(f"{path}: importing it", module_spec.loader.exec_module, module)
        self.module = module
        fn = getattr(module, ref["function"], None)
        if not callable(fn):
            raise HarnessError(f"{path}: no function named {ref['function']!r} (reference.function in task.toml)")
        self.fn = fn
        self.fn_name = ref["function"]
        self.jit = jax.jit(fn)
        # The float64 reference takes the inputs at their own dtype and widens them inside XLA:
        # no float64 copy of every input is built in numpy first. The barrier keeps the widened
        # inputs exactly what numpy's astype gave (no rewrite of the reference around them).
        self.jit64 = jax.jit(lambda *a: fn(*(_widen(x) for x in a)))

    def generator(self, name):
        fn = getattr(self.module, name, None)
        if not callable(fn):
            raise HarnessError(f"{self.path}: generator function {name!r} is not defined")
        return fn

    def reference(self, *args):
        """The jitted reference on `args`, any failure one line naming the file and function."""
        # Blocked on inside, as dispatch is asynchronous: an error in the computation (out of
        # memory) surfaces here, not when the result is read.
        return _user(f"{self.path}: {self.fn_name}()", lambda *a: jax.block_until_ready(self.jit(*a)), *args)

    def reference64(self, *args):
        """`reference` in float64, `args` from `_args(..., wide=True)`."""
        return _user(f"{self.path}: {self.fn_name}()", lambda *a: jax.block_until_ready(self.jit64(*a)), *args)

    def shape(self, tensor, workload):
        axes = self.spec["workloads"][workload]["axes"]
        return tuple(axes[a] for a in tensor["shape"])


def _first_line(e):
    text = str(e).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= 300 else line[:300] + "..."


def _out_of_memory(e):
    return isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in str(e) or "Out of memory" in str(e)


def _user(where, fn, *args):
    """Runs task code (import, reference, generator): an exception becomes one line that names
    the file and the function (`where`), with the memory limit when it ran out of memory."""
    try:
        return fn(*args)
    except HarnessError:
        raise
    except tensors.GeneratorError as e:
        raise HarnessError(f"{where}: {e}") from None
    except BaseException as e:  # SystemExit or KeyboardInterrupt in task code included
        if _out_of_memory(e):
            limit = f"{_MEMORY_LIMIT / 2**30:.1f} GiB" if _MEMORY_LIMIT else "no limit"
            raise HarnessError(f"{where}: ran out of memory (the reference process is limited to {limit}; --reference-memory): {_first_line(e)}") from None
        raise HarnessError(f"{where}: raised {type(e).__name__}: {_first_line(e)}{_task_line(e)}") from None


# Frames in these places are ours or installed libraries', never the task's own code.
_NOT_TASK = tuple({os.path.dirname(os.path.abspath(__file__)), sys.prefix, sys.base_prefix, sys.exec_prefix})


def _task_line(e):
    """` (line N)` of the innermost frame of the task's own code where `e` was raised (the
    file named too when it is not the one `where` names), or "" when there is none."""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        name = frame.filename
        if name.startswith("<") or os.path.abspath(name).startswith(_NOT_TASK):
            continue
        return f" (line {frame.lineno})" if os.path.basename(name) == "reference.py" else f" ({name}, line {frame.lineno})"
    return ""


def _task(req):
    try:
        return TASKS[req["task"]]
    except KeyError:
        raise HarnessError(f"task {req['task']!r} is not loaded") from None


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _paths(cache_dir, task_hash, workload, seed):
    # The hash and numbers become a path: only well-formed values (the judge computes the hash;
    # this guards against one that is not a digest ever naming a place outside the cache).
    if not isinstance(task_hash, str) or not _DIGEST.fullmatch(task_hash):
        raise HarnessError(f"task content hash {task_hash!r} is not a digest")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (workload, seed)):
        raise HarnessError(f"workload {workload!r} and seed {seed!r} must be whole numbers")
    base = os.path.join(cache_dir, task_hash[:24], f"w{workload}_s{seed}_h{HARNESS_VERSION}")
    return base + ".inputs.safetensors", base + ".ref.safetensors", base + ".meta.json"


def _to_disk(arr, dtype_name):
    # safetensors has no bfloat16 for numpy without torch: store raw bits.
    return arr.view(np.uint16) if dtype_name == "bfloat16" else arr


def _from_disk(arr, dtype_name):
    return arr.view(tensors.np_dtype(dtype_name)) if dtype_name == "bfloat16" else arr


def _generate(state, workload, seed):
    spec = state.spec
    w = spec["workloads"][workload]
    dists = dict(w["inputs"])
    arrays = []
    for idx, inp in enumerate(spec["inputs"]):
        rng = np.random.default_rng(np.random.SeedSequence([seed, workload, idx]))
        dist = dists[inp["name"]]
        if dist["dist"] == "generator":
            where = f"{state.path}: generator {dist['function']}() for input {inp['name']}"
            arrays.append(_user(where, tensors.draw, rng, dist, state.shape(inp, workload), inp["dtype"], w["axes"], state.generator))
        else:
            arrays.append(tensors.draw(rng, dist, state.shape(inp, workload), inp["dtype"], w["axes"], state.generator))
    return arrays


_NARROW = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(jnp.bfloat16))


def _widen(x):
    """A float input below float64, widened (inside the float64 reference's trace)."""
    if x.dtype in _NARROW:
        return jax.lax.optimization_barrier(x.astype(jnp.float64))
    return x


def _args(spec, arrays, wide):
    """The reference's arguments: arrays as JAX arrays at their own dtype (the float64
    reference widens them itself), scalars as Python numbers when `wide`."""
    args = []
    for inp, a in zip(spec["inputs"], arrays, strict=False):
        if not inp["shape"]:
            a = a.reshape(())
            if wide:
                a = (a.astype(np.float64) if inp["dtype"] in _FLOATS else a).item()
            args.append(a)
        else:
            args.append(jnp.asarray(a))
    return args


def _reference64(state, arrays, workload):
    outs = [np.asarray(o) for o in _as_list(state.reference64(*_args(state.spec, arrays, wide=True)))]
    where = f"{state.path}: {state.fn_name}()"
    if len(outs) != len(state.spec["outputs"]):
        raise HarnessError(f"{where}: returned {len(outs)} outputs, task.toml declares {len(state.spec['outputs'])}")
    for out, r in zip(state.spec["outputs"], outs, strict=False):
        want = state.shape(out, workload)
        if tuple(r.shape) != want:
            raise HarnessError(f"{where}: output {out['name']} has shape {tuple(r.shape)}, task.toml declares {want}")
        # Run in float64 the dtype cannot match a float declaration exactly; its kind must.
        floating = np.issubdtype(r.dtype, np.floating)
        if floating != (out["dtype"] in _FLOATS) or np.issubdtype(r.dtype, np.complexfloating):
            raise HarnessError(f"{where}: output {out['name']} is {r.dtype}, task.toml declares {out['dtype']}")
    return outs


def prepare(req):
    """Ensures inputs + float64 reference for (task, workload, seed) exist on disk. The judge
    keeps the cache to a size (least recently used first, inputs before references): a hit
    marks the entry used, missing inputs are drawn again from the seed, a missing reference is
    computed again."""
    state = _task(req)
    w, seed = req["workload"], req["seed"]
    inp_path, ref_path, meta_path = _paths(req["cache_dir"], state.spec["content_hash"], w, seed)
    meta = _read_meta(meta_path)
    if meta is not None and os.path.exists(ref_path):
        if not os.path.exists(inp_path):
            arrays = _generate(state, w, seed)
            hashes = {i["name"]: tensors.digest(a) for i, a in zip(state.spec["inputs"], arrays, strict=False)}
            # A generator that draws differently now (it should not): its reference is stale.
            if hashes != meta["input_hashes"]:
                return _write_entry(state, w, arrays, inp_path, ref_path, meta_path)
            _save_atomic(lambda p: save_file(_disk_inputs(state.spec, arrays), p), inp_path)
        # The entry's last use, for the cache's eviction order.
        with contextlib.suppress(OSError):
            os.utime(meta_path)
        return {"inputs": inp_path, "reference": ref_path, "input_hashes": meta["input_hashes"], "cached": True}
    os.makedirs(os.path.dirname(inp_path), exist_ok=True)
    return _write_entry(state, w, _generate(state, w, seed), inp_path, ref_path, meta_path)


def _read_meta(meta_path):
    try:
        with open(meta_path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _disk_inputs(spec, arrays):
    return {f"in.{i['name']}": _to_disk(a, i["dtype"]) for i, a in zip(spec["inputs"], arrays, strict=False)}


def _save_atomic(write, path):
    # Write-then-rename so a killed process never leaves a half-written cache entry.
    tmp = f"{path}.tmp{os.getpid()}"
    write(tmp)
    os.replace(tmp, path)


def _write_entry(state, w, arrays, inp_path, ref_path, meta_path):
    spec = state.spec
    refs = _reference64(state, arrays, w)
    ref = {f"ref.{o['name']}": np.ascontiguousarray(r.astype(np.float64) if o["dtype"] in _FLOATS else r) for o, r in zip(spec["outputs"], refs, strict=False)}
    meta = {"input_hashes": {i["name"]: tensors.digest(a) for i, a in zip(spec["inputs"], arrays, strict=False)}}
    os.makedirs(os.path.dirname(inp_path), exist_ok=True)
    _save_atomic(lambda p: save_file(_disk_inputs(spec, arrays), p), inp_path)
    _save_atomic(lambda p: save_file(ref, p), ref_path)

    def write_meta(p):
        with open(p, "w") as f:
            json.dump(meta, f)

    # The metadata last: an entry without it is never taken as complete.
    _save_atomic(write_meta, meta_path)
    return {"inputs": inp_path, "reference": ref_path, "input_hashes": meta["input_hashes"], "cached": False}


def _load_reference(state, req, w, seed):
    """The cached reference of (workload, seed), computed again if the cache's cap evicted it."""
    _, ref_path, _ = _paths(req["cache_dir"], state.spec["content_hash"], w, seed)
    try:
        return load_file(ref_path)
    except FileNotFoundError:
        return load_file(prepare({**req, "workload": w, "seed": seed})["reference"])


_FLOATS = ("float32", "float64", "float16", "bfloat16")


def inputs(req):
    """Writes the inputs of (task, workload, seed) as raw bytes, one file per input
    (`{prefix}.{name}.bin`), without a reference: fresh sets for timed calls, copied by the judge
    into the candidate's buffers (the one re-checked gets its reference from `prepare`)."""
    state = _task(req)
    w, seed = req["workload"], req["seed"]
    arrays = _generate(state, w, seed)
    paths = {}
    for i, a in zip(state.spec["inputs"], arrays, strict=False):
        path = f"{req['prefix']}.{i['name']}.bin"
        np.ascontiguousarray(_to_disk(a, i["dtype"])).tofile(path)
        paths[i["name"]] = path
    return {"paths": paths}


def _read_output(path, dtype, count):
    """Reads a raw output the runner wrote: a regular file, never through a link and never
    blocking on a FIFO (the directory is the candidate's), at most the expected size."""
    dtype = np.dtype(dtype)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise _Unfit("RUNTIME_ERROR", "output_missing", "is not a regular file")
        data = f.read((count + 1) * dtype.itemsize)
    if len(data) % dtype.itemsize:
        raise _Unfit("INCORRECT_SHAPE", "output_size_mismatch", f"holds {len(data)} bytes, not whole {dtype.name} elements")
    return np.frombuffer(data, dtype=dtype)


class _Unfit(Exception):
    """An output file the candidate left unusable as a tensor (its directory is the
    candidate's, so anything may be there): a verdict on the candidate, (status, reason, detail)."""


def _load_output(path, dt, shape):
    """The candidate's output at `path` as an array of dtype `dt` and `shape`, or raises
    `_Unfit` with the verdict when the file cannot be that."""
    try:
        cand = _read_output(path, tensors.np_dtype(dt), math.prod(shape))
    except OSError as e:
        raise _Unfit("RUNTIME_ERROR", "output_missing", e.strerror) from None
    if cand.size != math.prod(shape):
        raise _Unfit("INCORRECT_SHAPE", "output_size_mismatch", f"{cand.size} elements, expected {shape}")
    return cand.reshape(shape)


def _fin(x):
    x = float(x)
    return x if math.isfinite(x) else None


# Elements per chunk in `_compare`: every temporary stays in the L2 cache.
_CHUNK = 1 << 16


class _CompareStats(ctypes.Structure):
    _fields_ = [("max_abs", ctypes.c_double), ("max_rel", ctypes.c_double), ("worst", ctypes.c_int64)]


def _native_helper(name, symbol, argtypes, probe):
    """`symbol` (returning int) from the helper `name`.so built next to the harness package,
    or None when it is missing, does not load or fails `probe(fn)`: callers then take their
    numpy path."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), f"{name}.so")
    if not os.path.exists(path):
        return None
    try:
        fn = getattr(ctypes.CDLL(path), symbol)
    except (OSError, AttributeError):
        return None
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    return fn if probe(fn) else None


def _probe_compare(fn):
    """The comparer's answers on values whose answer is known: a pass and a non-finite value."""
    ref = np.array([1.0, 2.5, -3.0])
    s = _CompareStats()
    ok = fn(np.array([1.0, 2.0, -3.0], np.float32).ctypes.data, 4, ref.ctypes.data, 3, 0.5, 0.0, ctypes.byref(s))
    bad = fn(np.array([1.0, 2.0, np.nan]).ctypes.data, 8, ref.ctypes.data, 3, 0.5, 0.0, ctypes.byref(_CompareStats()))
    return (ok, s.max_abs, s.max_rel, s.worst, bad) == (1, 0.5, 0.2, 1, -1)


@functools.cache
def _comparer():
    """The one-pass tolerance check (compare.c), or None."""
    args = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double, ctypes.c_double, ctypes.POINTER(_CompareStats)]
    return _native_helper("compare", "ksmith_compare", args, _probe_compare)


def _compare_fast(cand, ref, atol, rtol):
    """`_compare`'s answer in one native pass when every value is finite and every element is
    within tolerance (metrics; nothing out of tolerance); None otherwise, or where the helper
    is missing: the numpy path decides then."""
    fn = _comparer()
    if fn is None or ref.dtype != np.float64 or cand.size != ref.size or not ref.size:
        return None
    c = cand.reshape(-1)
    if c.dtype == np.float16 or c.dtype.name == "bfloat16":
        c = c.astype(np.float32)  # exact: both are subsets of float32
    if c.dtype not in (np.float32, np.float64):
        return None
    c, r = np.ascontiguousarray(c), np.ascontiguousarray(ref.reshape(-1))
    s = _CompareStats()
    if fn(c.ctypes.data, c.dtype.itemsize, r.ctypes.data, r.size, float(atol), float(rtol), ctypes.byref(s)) != 1:
        return None
    return {
        "max_abs_error": _fin(s.max_abs),
        "max_rel_error": _fin(s.max_rel),
        "worst_index": [int(i) for i in np.unravel_index(s.worst, ref.shape)] if ref.ndim else [],
        "fraction_bad": 0.0,
        # `c` holds the output's values exactly (a float16 or bfloat16 widened to float32).
        "worst_value": _fin(c[s.worst]),
        "worst_expected": _fin(r[s.worst]),
    }


def _compare(cand, ref, atol, rtol):
    """Elementwise tolerance check in float64: |cand - ref| <= atol + rtol * |ref|.

    Returns (number of elements out of tolerance, metrics). A finite output within tolerance
    is decided in one native pass (`_compare_fast`); everything else by `_compare_numpy`.
    """
    fast = _compare_fast(cand, ref, atol, rtol)
    return (0, fast) if fast is not None else _compare_numpy(cand, ref, atol, rtol)


def _compare_numpy(cand, ref, atol, rtol):
    """`_compare` in numpy, corner cases included. Works chunk by chunk so that the dozen
    elementwise passes run on cache-resident data; scoring happens only on failures.
    """
    c_all, r_all = cand.reshape(-1), ref.reshape(-1)
    n_bad = 0
    max_abs = max_rel = 0.0
    worst_bad, worst_score = 0, -1.0
    worst_any, worst_err = 0, -1.0
    for start in range(0, r_all.size, _CHUNK):
        c = c_all[start : start + _CHUNK].astype(np.float64)
        r = r_all[start : start + _CHUNK]
        with np.errstate(invalid="ignore"):  # inf - inf
            err = np.abs(c - r)
        absr = np.abs(r)
        tol = absr * rtol + atol
        ok = err <= tol  # NaN errors count as bad
        if not ok.all():
            idx = np.flatnonzero(~ok)
            cb, rb = c[idx], r[idx]
            same_inf = np.isinf(cb) & (cb == rb)  # inf == inf of the same sign is a match
            err[idx[same_inf]] = 0.0
            idx = idx[~same_inf]
            if idx.size:
                n_bad += idx.size
                eb, tb = err[idx], tol[idx]
                with np.errstate(divide="ignore", invalid="ignore"):
                    score = np.where(np.isnan(eb), np.inf, eb / np.maximum(tb, 1e-300))
                j = int(np.argmax(score))
                if score[j] > worst_score:
                    worst_score, worst_bad = float(score[j]), start + int(idx[j])
                err[~np.isfinite(err)] = 0.0  # keep the max statistics finite
        k = int(np.argmax(err))
        if err[k] > worst_err:
            worst_err, worst_any = float(err[k]), start + k
        np.maximum(absr, 1e-30, out=absr)
        with np.errstate(over="ignore"):
            max_rel = max(max_rel, float((err / absr).max()))
        max_abs = max(max_abs, float(err[k]))
    worst = worst_bad if n_bad else worst_any
    metrics = {
        "max_abs_error": _fin(max_abs),
        "max_rel_error": _fin(max_rel),
        "worst_index": [int(i) for i in np.unravel_index(worst, ref.shape)] if ref.ndim and ref.size else [],
        "fraction_bad": n_bad / r_all.size if r_all.size else 0.0,
        "worst_value": _fin(c_all[worst]) if c_all.size else None,
        "worst_expected": _fin(r_all[worst]) if r_all.size else None,
    }
    return n_bad, metrics


def _given_arrays(state, files, w):
    """A timed call's inputs as the judge wrote them (raw bytes, one file per input), mapped
    rather than read: they are copied once, into the reference's arguments."""
    arrays = []
    for i in state.spec["inputs"]:
        disk = np.uint16 if i["dtype"] == "bfloat16" else tensors.np_dtype(i["dtype"])
        shape = state.shape(i, w)
        if math.prod(shape):
            raw = np.memmap(files[i["name"]], dtype=disk, mode="r", shape=(math.prod(shape),))
        else:
            raw = np.empty(0, dtype=disk)
        arrays.append(_from_disk(raw, i["dtype"]).reshape(shape))
    return arrays


def check(req):
    """Judges one candidate call's outputs against the cached reference, or (`given_inputs`, a
    timed call's fresh inputs, never seen again) against a reference computed here in memory;
    the judge has already compared those inputs with the buffers after the call."""
    state = _task(req)
    spec = state.spec
    w, seed = req["workload"], req["seed"]
    if req.get("given_inputs"):
        arrays = _given_arrays(state, req["given_inputs"], w)
        refs = {
            f"ref.{o['name']}": np.asarray(r, dtype=np.float64) if o["dtype"] in _FLOATS else r
            for o, r in zip(spec["outputs"], _reference64(state, arrays, w), strict=False)
        }
    else:
        refs = _load_reference(state, req, w, seed)
    result = {"passed": True, "status": "PASSED", "reason": None, "outputs": []}

    def fail(status, reason, detail):
        if result["passed"]:
            result.update(passed=False, status=status, reason=reason, detail=detail)

    # The runner compared its inputs after the call with the file it read them from.
    for name in req.get("inputs_changed") or []:
        fail("INCORRECT_NUMERICAL", "input_mutated", f"input {name} changed during the call")
    for out in spec["outputs"]:
        name, dt = out["name"], out["dtype"]
        shape = state.shape(out, w)
        path = req["outputs"][name]
        try:
            cand = _load_output(path, dt, shape)
        except _Unfit as e:
            status, reason, detail = e.args
            fail(status, reason, f"output {name}: {detail}")
            continue
        ref = refs[f"ref.{name}"]
        fast = None
        if dt in _FLOATS:
            fast = _compare_fast(cand, ref, out["atol"], out["rtol"])
            n_bad, metrics = (0, fast) if fast is not None else _compare_numpy(cand, ref, out["atol"], out["rtol"])
        else:
            n_bad = int(np.count_nonzero(cand.astype(np.int64) != ref.astype(np.int64)))
            metrics = {"fraction_bad": n_bad / max(cand.size, 1), "max_abs_error": _fin(np.abs(cand.astype(np.float64) - ref).max())}
        metrics["name"] = name
        result["outputs"].append(metrics)
        # Every poison pattern is a NaN: an output the fast pass found finite holds none.
        unwritten = tensors.poisoned_mask(cand, dt) if fast is None else None
        if unwritten is not None and unwritten.any():
            idx = [int(i) for i in np.unravel_index(int(np.argmax(unwritten)), shape)]
            fail("INCORRECT_NUMERICAL", "output_unwritten", f"output {name}: {int(unwritten.sum())} elements never written (first at {idx})")
            continue
        if n_bad == 0:
            continue
        c64 = cand.astype(np.float64)
        if dt in _FLOATS and (np.isnan(c64) & ~np.isnan(ref)).any():
            fail("INCORRECT_NUMERICAL", "nan_in_output", f"output {name}: {int(np.isnan(c64).sum())} NaN elements")
        elif np.ptp(c64) == 0 and np.ptp(ref) > 0:
            fail("INCORRECT_NUMERICAL", "degenerate_output", f"output {name}: every element is {float(c64.flat[0])!r}")
        elif _matches_other_seed(req, state, name, cand, out):
            fail("INCORRECT_NUMERICAL", "stale_output", f"output {name} equals the result for an earlier input")
        else:
            fail(
                "INCORRECT_NUMERICAL",
                "numerical_mismatch",
                f"output {name}: {metrics['fraction_bad']:.3%} of elements out of tolerance; "
                f"worst at {metrics.get('worst_index')}: got {metrics.get('worst_value')}, expected {metrics.get('worst_expected')}",
            )
    return result


def _matches_other_seed(req, state, name, cand, out):
    for other in req.get("previous_seeds", []):
        _, ref_path, _ = _paths(req["cache_dir"], state.spec["content_hash"], req["workload"], other)
        if os.path.exists(ref_path):
            n_bad, _ = _compare(cand, load_file(ref_path)[f"ref.{name}"], out["atol"], out["rtol"])
            if n_bad == 0:
                return True
    return False


def _load_inputs(state, req, w, seed):
    inp_path, _, _ = _paths(req["cache_dir"], state.spec["content_hash"], w, seed)
    try:
        raw = load_file(inp_path)
    except FileNotFoundError:
        # Evicted by the cache's cap: drawn again from the seed (the same values).
        return _generate(state, w, seed)
    return [_from_disk(raw[f"in.{i['name']}"], i["dtype"]) for i in state.spec["inputs"]]


def _accelerator():
    """The accelerator JAX sees (a GPU), or None on a CPU-only machine."""
    return jax.devices()[0] if jax.default_backend() != "cpu" else None


def _timing_device(req):
    """Where the baseline is timed: the accelerator for a GPU candidate, else the host CPU."""
    acc = _accelerator()
    return acc if req.get("device") == "gpu" and acc is not None else _CPU


def _flusher(nbytes, device):
    """Evicts the last-level cache before a timed call: host memory on a CPU, L2 on a GPU."""
    if not nbytes:
        return lambda _i: None
    if device.platform == "cpu":
        buf = np.zeros(nbytes // 8, dtype=np.float64)
        return buf.fill
    fill = jax.jit(lambda b, v: jnp.full_like(b, v))
    state = {"buf": jax.device_put(jnp.zeros(nbytes // 4, jnp.float32), device)}

    def flush(i):
        state["buf"] = jax.block_until_ready(fill(state["buf"], float(i)))

    return flush


def _probe_evict(fn):
    probe = np.zeros(16)
    return fn(probe.ctypes.data, probe.nbytes) == 1


@functools.cache
def _evictor():
    """The line-by-line evictor (evict.c), or None."""
    return _native_helper("evict", "ksmith_evict", [ctypes.c_void_p, ctypes.c_size_t], _probe_evict)


def _evict_arrays(evict, arrays):
    """Evicts every given jax array's buffer (inputs of the next call, outputs of the last)."""
    for a in arrays:
        if hasattr(a, "unsafe_buffer_pointer"):
            evict(a.unsafe_buffer_pointer(), a.nbytes)


def gpu_hw(req):
    """Measured device roofline: copy bandwidth and matrix-unit peaks (bf16, fp32) via XLA."""
    dev = _accelerator()
    if dev is None:
        raise HarnessError("no accelerator visible to JAX")

    def best_of(fn, *args, reps=10):
        jax.block_until_ready(fn(*args))
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best = min(best, time.perf_counter() - t0)
        return best

    n = 256 << 20  # 1 GiB of float32
    x = jax.device_put(jnp.ones((n,), jnp.float32), dev)
    copy_s = best_of(jax.jit(lambda a: a * 1.0001), x)
    out = {"device": dev.device_kind, "copy_gbps": 2 * 4 * n / copy_s / 1e9}
    for name, dt in (("bf16", jnp.bfloat16), ("fp32", jnp.float32)):
        m = 8192
        a = jax.device_put(jnp.ones((m, m), dt), dev)
        t = best_of(jax.jit(lambda p, q: jnp.dot(p, q, preferred_element_type=jnp.float32)), a, a)
        out[f"matmul_{name}_tflops"] = 2 * m**3 / t / 1e12
    return out


def baseline(req):
    """Times one round of the jitted reference at the task's dtypes, rotating input sets."""
    state = _task(req)
    w = req["workload"]
    device = _timing_device(req)
    key = (state.spec["content_hash"], w, str(device))
    if _DEVICE_INPUTS.get("key") != key:
        _DEVICE_INPUTS.clear()
        _DEVICE_INPUTS["key"] = key
        _DEVICE_INPUTS["sets"] = [
            jax.block_until_ready(jax.device_put(_args(state.spec, _load_inputs(state, req, w, s), wide=False), device)) for s in req["seeds"]
        ]
    sets = _DEVICE_INPUTS["sets"]
    # Cold caches on a CPU: the call's own inputs and the buffers of the previous call's outputs
    # (which XLA's allocator hands out again) are evicted line by line, as the judge evicts the
    # candidate's; the last-level-cache-sized write is the fallback.
    evict = _evictor() if req.get("evict") and device.platform == "cpu" else None
    flush = _flusher(0 if evict else req.get("flush_bytes", 0), device)
    for i in range(req.get("warmup", 0)):
        jax.block_until_ready(state.jit(*sets[i % len(sets)]))
    samples = []
    last = []
    for i in range(req["reps"]):
        args = sets[i % len(sets)]
        if evict:
            _evict_arrays(evict, list(args) + last)
        # Freed only now: a large output's memory may be unmapped on free.
        last = out = None
        flush(i)
        t0 = time.perf_counter_ns()
        out = jax.block_until_ready(state.jit(*args))
        samples.append(time.perf_counter_ns() - t0)
        last = jax.tree_util.tree_leaves(out)
    method = "lines" if evict else ("buffer" if req.get("flush_bytes") else "none")
    return {"samples_ns": samples, "eviction": method}


def warm(req):
    """Compiles, without running them, the programs an evaluation's first timed rounds and
    re-checks need for each workload: the baseline at the task's dtypes on the timing device and
    the float64 reference, with the argument types the later calls will have (taken from the
    first check seed's cached inputs; a workload without them is skipped: its `prepare` compiles
    the reference anyway). The judge sends it while it builds and starts the candidate, and
    reads the reply before its next request; the persistent compilation cache makes this cheap
    after the first process, but tracing and lowering remain (0.1-0.3 s per workload)."""
    state = _task(req)
    device = _timing_device(req)
    warmed = 0
    for w in req["workloads"]:
        _, _, meta_path = _paths(req["cache_dir"], state.spec["content_hash"], w, req["seed"])
        if not os.path.exists(meta_path):
            continue
        arrays = _load_inputs(state, req, w, req["seed"])
        where = f"{state.path}: {state.fn_name}()"
        timed = jax.device_put(_args(state.spec, arrays, wide=False), device)
        _user(where, lambda a=timed: state.jit.lower(*a).compile())
        _user(where, lambda a=arrays: state.jit64.lower(*_args(state.spec, a, wide=True)).compile())
        warmed += 1
    if req.get("evict") and device.platform == "cpu":
        _evictor()
    return {"warmed": warmed}


def load_task(req):
    spec = req["task"]
    state = TaskState(spec)
    for _wi, w in enumerate(spec["workloads"]):
        for _name, d in w["inputs"]:
            if d["dist"] == "generator":
                state.generator(d["function"])
    TASKS[spec["content_hash"]] = state
    return {}


def validate(req):
    """Runs the reference on every workload and reports tasks that cannot catch wrong kernels."""
    state = _task(req)
    spec = state.spec
    problems = []

    def problem(field, message):
        problems.append({"field": field, "message": message})

    # One workload per request when asked (the judge's time limit is per request).
    for w in [req["workload"]] if "workload" in req else range(len(spec["workloads"])):
        try:
            prepare({**req, "workload": w, "seed": 0})
        except HarnessError as e:
            problem(f"workloads[{w}]", str(e))
            continue
        refs = _load_reference(state, req, w, 0)
        arrays = _load_inputs(state, req, w, 0)
        try:
            _check_deterministic(state, w, arrays)
        except HarnessError as e:
            problem(f"workloads[{w}]", str(e))
            continue
        try:
            low = [np.asarray(o) for o in _as_list(state.reference(*_args(spec, arrays, wide=False)))]
        except HarnessError as e:
            problem(f"workloads[{w}]", f"at the task's dtypes: {e}")
            continue
        try:
            seq, summed = sequential.evaluate(state.fn, _args(spec, arrays, wide=False))
        except Exception:
            # A construct the sequential evaluator cannot follow: that check is skipped.
            seq, summed = [], False
        rng = np.random.default_rng(1234 + w)
        for oi, out in enumerate(spec["outputs"]):
            field = f"outputs[{oi}]"
            ref = refs[f"ref.{out['name']}"]
            if oi < len(low) and str(low[oi].dtype) != str(tensors.np_dtype(out["dtype"])):
                problem(f"{field}.dtype", f"workloads[{w}]: the reference returns {low[oi].dtype}, task declares {out['dtype']}")
            if out["dtype"] not in _FLOATS:
                if np.ptp(ref) == 0:
                    problem(field, f"workloads[{w}]: output is constant ({ref.flat[0]}); a constant kernel would pass")
                continue
            atol, rtol = out["atol"], out["rtol"]
            finite = ref[np.isfinite(ref)]
            if finite.size == 0:
                problem(field, f"workloads[{w}]: reference output has no finite values")
                continue
            mean_const = np.full_like(ref, float(finite.mean()))
            if _compare(mean_const, ref, atol, rtol)[0] == 0:
                problem(field, f"workloads[{w}]: output is near-constant: a constant {finite.mean():.6g} passes atol={atol}, rtol={rtol}")
            elif _compare(np.zeros_like(ref), ref, atol, rtol)[0] == 0:
                problem(f"{field}.atol", f"workloads[{w}]: vacuous tolerance: an all-zeros output passes")
            rms = float(np.sqrt(np.mean(finite**2)))
            noisy = ref + rng.normal(0.0, 0.1 * rms, size=ref.shape)
            if _compare(noisy, ref, atol, rtol)[0] == 0:
                problem(f"{field}.rtol", f"workloads[{w}]: vacuous tolerance: the reference plus noise of 10% of its RMS ({0.1 * rms:.3g}) passes")
            if oi < len(low):
                n_bad, m = _compare(low[oi], ref, atol, rtol)
                if n_bad:
                    problem(
                        f"{field}.atol",
                        f"workloads[{w}]: tolerance too tight for {out['dtype']}: the reference itself at {out['dtype']} "
                        f"fails on {m['fraction_bad']:.3%} of elements (max abs error {m['max_abs_error']}, max rel {m['max_rel_error']})",
                    )
                    continue
            if summed and oi < len(seq):
                n_bad, m = _compare(seq[oi].astype(np.float64), ref, atol, rtol)
                if n_bad:
                    problem(
                        f"{field}.atol",
                        f"workloads[{w}]: tolerance too tight for a plain sequential kernel: summing in float32 one term "
                        f"at a time, in order (as a straightforward loop does), fails on {m['fraction_bad']:.3%} of elements "
                        f"(max abs error {m['max_abs_error']}, max rel {m['max_rel_error']}); XLA's tree-shaped sums are more "
                        "accurate than any simple kernel, so loosen atol/rtol to what a correct loop reaches",
                    )
    return {"problems": problems}


def _check_deterministic(state, w, arrays):
    """Draws the inputs of (workload, seed 0) again: a generator that does not draw everything
    from the rng it is given (global numpy state, time) would give every seed's reference to
    inputs nobody can reproduce."""
    dists = dict(state.spec["workloads"][w]["inputs"])
    if not any(d["dist"] == "generator" for d in dists.values()):
        return
    again = _generate(state, w, 0)
    for inp, a, b in zip(state.spec["inputs"], arrays, again, strict=False):
        d = dists[inp["name"]]
        if d["dist"] == "generator" and tensors.digest(a) != tensors.digest(b):
            raise HarnessError(
                f"{state.path}: generator {d['function']}() for input {inp['name']}: not deterministic: two calls with "
                "the same rng returned different arrays (draw every random number from the rng argument)"
            )


def policy(req):
    """Static policy of a Python candidate (parsed here, never imported)."""
    syntax, violations = policy_mod.check([tuple(x) for x in req["sources"]], req["backend"])
    return {"syntax_errors": syntax, "violations": violations}


def _dist_version(name):
    """Installed version of a distribution without importing it ("-" when absent)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def hello(_req):
    return {
        "device": jax.default_backend(),
        "protocol": PROTOCOL,
        "harness_version": HARNESS_VERSION,
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "jax": jax.__version__,
            "jaxlib": getattr(jax.lib, "__version__", jax.__version__),
            # Backends the runner may import: part of the environment fingerprint.
            "triton": _dist_version("triton"),
            "torch": _dist_version("torch"),
        },
        "xla_threads": os.cpu_count(),
        # The poison pattern of each dtype, for the judge, which poisons timed outputs itself.
        "poison": {name: [np.dtype(uint).itemsize, bits] for name, (uint, bits) in tensors.POISON_BITS.items()},
    }


def _limit_memory():
    """Caps this process's private writable memory (RLIMIT_DATA, which counts heap and anonymous
    mappings but not reserved address space) so a reference that allocates without bound fails
    with MemoryError here instead of the machine's OOM killer ending it, or the judge.
    KSMITH_TRUSTED_MEMORY_BYTES (set by the judge from --reference-memory): bytes, "0" for no
    limit, "auto" (default): the machine's physical memory on the CPU backend, no limit on an
    accelerator (not verified under CUDA there)."""
    global _MEMORY_LIMIT
    import resource

    want = os.environ.get("KSMITH_TRUSTED_MEMORY_BYTES", "auto")
    if want == "auto":
        if jax.default_backend() != "cpu":
            return
        limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    else:
        limit = int(want)
    if limit <= 0:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    _MEMORY_LIMIT = limit


def main():
    _limit_memory()
    main_loop(
        {
            "hello": hello,
            "load_task": load_task,
            "prepare": prepare,
            "inputs": inputs,
            "check": check,
            "baseline": baseline,
            "warm": warm,
            "validate": validate,
            "policy": policy,
            "gpu_hw": gpu_hw,
        }
    )


if __name__ == "__main__":
    main()
