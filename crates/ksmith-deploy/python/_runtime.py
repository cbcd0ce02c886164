"""Runtime of a KernelSmith export: each judged kernel as a JAX callable, with a safe fallback.

C kernels are compiled (with the judge's flags) together with a generated XLA FFI handler into
one shared library, registered as an FFI target on XLA's CPU platform and called through
``jax.ffi.ffi_call``; CUDA kernels the same way on the CUDA platform. Pallas kernels are JAX
code and are called directly; Triton launchers are replayed through ``jax_triton.triton_call``.
Builds happen on first use (or ``python -m PACKAGE build``) and are cached by content.

A kernel is used only where it was validated: the same dtypes, every axis inside the range of
the workloads the judge checked (or any shape, when asked), and a platform it runs on. Anything
else goes to the task's JAX reference (for ``PACKAGE.NAME(...)``) or to the user's own function
(for ``@PACKAGE.apply(NAME)``). ``KSMITH_KERNELS_DISABLE=1`` turns every substitution off.
"""

import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np

DISABLE_ENV = "KSMITH_KERNELS_DISABLE"
CACHE_ENV = "KSMITH_KERNELS_CACHE"
FORMAT = 1
BUILD_TIMEOUT_S = 600

log = logging.getLogger("ksmith_kernels")
_registered = set()
_register_lock = threading.Lock()


class FallbackWarning(UserWarning):
    """A call went to the reference (or the decorated function) instead of the kernel; warned
    once per kernel and reason (outside the validated shapes, another dtype, unavailable here)."""


class KernelUnavailable(RuntimeError):
    """The kernel cannot run here (no compiler or device, a failed build); the message says why."""


class ExportError(ImportError):
    """The export itself is damaged (its manifest); the message names the file and field."""


_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool")
_BINDINGS = ("cpu_ffi", "cuda_ffi", "pallas", "triton")


def _check_spec(where, spec):
    """Raises ExportError naming the first field of a kernel's manifest entry that is not as written."""

    def need(cond, field, what):
        if not cond:
            raise ExportError(f"{where}.{field}: expected {what}; the manifest was changed after export, re-export it")

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    need(isinstance(spec, dict), "", "a table")
    for key in ("dir", "language", "entry_point", "symbol", "target", "description", "workload_set"):
        need(isinstance(spec.get(key), str), key, "a string")
    need(spec.get("binding") in _BINDINGS, "binding", f"one of {', '.join(_BINDINGS)}")
    need(spec.get("handler") is None or isinstance(spec.get("handler"), str), "handler", "a string or null")
    for key in ("sources", "flags"):
        need(isinstance(spec.get(key), list) and all(isinstance(x, str) for x in spec[key]), key, "a list of strings")
    need(bool(spec["sources"]), "sources", "at least one file")
    axes = spec.get("axes")
    need(isinstance(axes, list) and axes, "axes", "a list of axes")
    for i, a in enumerate(axes):
        need(isinstance(a, dict) and isinstance(a.get("name"), str), f"axes[{i}].name", "a string")
        need(a.get("kind") in ("var", "const"), f"axes[{i}].kind", "var or const")
        need(a["kind"] == "var" or is_int(a.get("value")), f"axes[{i}].value", "an integer")
    names = {a["name"] for a in axes}
    for group in ("inputs", "outputs"):
        tensors = spec.get(group)
        need(isinstance(tensors, list) and (tensors or group == "inputs"), group, "a list of tensors")
        for i, t in enumerate(tensors):
            need(isinstance(t, dict) and isinstance(t.get("name"), str), f"{group}[{i}].name", "a string")
            need(isinstance(t.get("shape"), list) and all(x in names for x in t["shape"]), f"{group}[{i}].shape", "a list of axis names")
            need(t.get("dtype") in _DTYPES, f"{group}[{i}].dtype", f"one of {', '.join(_DTYPES)}")
            if group == "outputs":
                for tol in ("atol", "rtol"):
                    need(isinstance(t.get(tol), (int, float)) and t[tol] >= 0, f"{group}[{i}].{tol}", "a number >= 0")
    ref = spec.get("reference")
    need(isinstance(ref, dict) and isinstance(ref.get("file"), str) and isinstance(ref.get("function"), str), "reference", "{file, function}")
    env = spec.get("envelope")
    need(isinstance(env, dict), "envelope", "a table")
    for k, v in env.items():
        need(
            k in names and isinstance(v, list) and len(v) == 2 and all(is_int(x) for x in v) and v[0] <= v[1],
            f"envelope.{k}",
            "[low, high] integers of an axis",
        )
    workloads = spec.get("workloads")
    need(isinstance(workloads, list) and workloads, "workloads", "a list of workloads")
    for i, w in enumerate(workloads):
        need(isinstance(w, dict) and isinstance(w.get("axes"), dict), f"workloads[{i}].axes", "a table")
        for k, v in w["axes"].items():
            need(k in names and is_int(v) and v > 0, f"workloads[{i}].axes.{k}", "a positive integer for an axis")
        need(isinstance(w.get("inputs"), list), f"workloads[{i}].inputs", "a list")
    files = spec.get("files")
    need(isinstance(files, dict) and all(isinstance(v, str) for v in files.values()), "files", "a table of sha256 hashes")
    need(isinstance(spec.get("provenance"), dict), "provenance", "a table")


def disabled():
    """Whether ``KSMITH_KERNELS_DISABLE`` turns every substitution off."""
    return os.environ.get(DISABLE_ENV, "").strip() not in ("", "0")


def dtype_of(name):
    """The JAX dtype for a task dtype name."""
    return jnp.dtype(jnp.bfloat16) if name == "bfloat16" else jnp.dtype(name)


def _cache_dir():
    base = os.environ.get(CACHE_ENV)
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "ksmith_kernels")
    return base


def _wheel_nvcc():
    """nvcc from the `nvidia-cuda-nvcc` wheel in this Python (CUDA 13's or 12's layout), if any:
    JAX's CUDA plugins bring it along, and ksmith's judge builds with the same wheels."""
    for base in sys.path:
        for rel in ("nvidia/cu13/bin/nvcc", "nvidia/cuda_nvcc/bin/nvcc"):
            path = os.path.join(base or ".", rel)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def _tool_version(tool):
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.splitlines()[0] if out.stdout else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))  # helper modules next to the file
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


def _kernel_doc(name, spec):
    """What ``help(PACKAGE.NAME)`` says: the call, the task, where it was judged, and the members."""
    sig = ", ".join(i["name"] for i in spec["inputs"])
    envelope = {k: tuple(v) for k, v in spec["envelope"].items()}
    members = [
        (f"{name}.unchecked({sig}, **axes)", "the kernel for any shape its signature allows"),
        (f"{name}.reference({sig})", "the task's JAX reference (what the kernel was checked against)"),
        (f"{name}.why_not({sig}, **axes)", "why a call would use the reference (None: the kernel)"),
        (f"{name}.status()", "'ready', or 'unavailable: WHY' (building it if needed)"),
    ]
    width = max(len(c) for c, _ in members)
    return (
        f"{name}({sig}): {spec['description']}\n\n"
        f"KernelSmith evaluation {spec['provenance']['evaluation']} ({spec['provenance']['solution']}, "
        f"{spec['language']} via {spec['binding']}); validated on {spec['workload_set']} workloads {envelope}.\n"
        f"Inside those shapes and dtypes a call runs the kernel (under jax.jit, vmap and grad too;\n"
        f"derivatives come from the reference); anything else runs the reference, with a\n"
        f"FallbackWarning once per reason.\n\n"
        "Members:\n" + "".join(f"  {call:<{width}}  {what}\n" for call, what in members)
    )


def _kernel_class(package, name, spec):
    """A class of its own per kernel, so that ``help(PACKAGE.NAME)`` is headed by the kernel's
    name and its documentation rather than by the runtime's generic class."""
    return type(name, (Kernel,), {"__doc__": _kernel_doc(name, spec), "__module__": package, "__qualname__": name})


class Kernel:
    """One exported kernel: ``k(*inputs)`` runs it where it was validated, else the reference."""

    def __init__(self, package, name, spec, root):
        self.package = package
        self.name = name
        self.spec = spec
        self.dir = os.path.join(root, spec["dir"])
        self.inputs = spec["inputs"]
        self.outputs = spec["outputs"]
        self.axis_names = [a["name"] for a in spec["axes"]]
        self.const_axes = {a["name"]: a["value"] for a in spec["axes"] if a["kind"] == "const"}
        self.envelope = {k: tuple(v) for k, v in spec["envelope"].items()}
        self.binding = spec["binding"]
        self._lock = threading.Lock()
        self._fn = None
        self._unavailable = None
        self._reference = None
        self._shapes = {}
        self._noted = set()
        # Reasons already warned about (one FallbackWarning each).
        self._warned = set()
        self.__name__ = self.__qualname__ = name
        self.__module__ = package
        self.__doc__ = _kernel_doc(name, spec)

    def __repr__(self):
        return f"<ksmith kernel {self.package}.{self.name} ({self.binding}): {self.status()}>"

    # -- the signature -------------------------------------------------------------------
    def bind(self, args, axes=None):
        """Axis values for these arguments; TypeError/ValueError when they do not fit the signature."""
        if len(args) != len(self.inputs):
            names = ", ".join(i["name"] for i in self.inputs)
            raise TypeError(f"{self.name}() takes {len(self.inputs)} inputs ({names}), got {len(args)}")
        values = dict(self.const_axes)
        for k, v in (axes or {}).items():
            if k not in self.axis_names:
                raise TypeError(f"{self.name}(): unknown axis {k!r} (axes: {', '.join(self.axis_names)})")
            if k in values and values[k] != v:
                raise ValueError(f"{self.name}(): axis {k} is fixed at {values[k]}, got {v}")
            values[k] = int(v)
        for spec, a in zip(self.inputs, args, strict=True):
            shape = tuple(np.shape(a)) if not hasattr(a, "shape") else tuple(a.shape)
            if len(shape) != len(spec["shape"]):
                want = "[" + ", ".join(spec["shape"]) + "]"
                raise ValueError(f"{self.name}(): input {spec['name']} has shape {shape}, expected {want}")
            for axis, v in zip(spec["shape"], shape, strict=True):
                if axis in values and values[axis] != v:
                    raise ValueError(
                        f"{self.name}(): input {spec['name']} has {axis}={v}, but {axis}={values[axis]} from the other inputs (or the task's constant)"
                    )
                values[axis] = int(v)
        # The reference defines the outputs' shapes: axes found only there (an output size
        # derived from the inputs) come from it, and must agree with everything else.
        for spec, shape in zip(self.outputs, self._reference_shapes(args), strict=True):
            if len(shape) != len(spec["shape"]):
                raise ValueError(f"{self.name}(): the reference's output {spec['name']} has shape {shape}; the kernel's is [{', '.join(spec['shape'])}]")
            for axis, v in zip(spec["shape"], shape, strict=True):
                if axis in values and values[axis] != v:
                    raise ValueError(f"{self.name}(): {axis}={values[axis]}, but for these inputs the reference's output {spec['name']} has {axis}={v}")
                values[axis] = int(v)
        missing = [a for a in self.axis_names if a not in values]
        if missing:
            raise TypeError(f"{self.name}(): axis {', '.join(missing)} is in no input's or output's shape; pass it as a keyword")
        return values

    def _reference_shapes(self, args):
        """The reference's output shapes for arguments of these shapes (abstract evaluation, cached)."""
        shapes = tuple(tuple(a.shape) if hasattr(a, "shape") else tuple(np.shape(a)) for a in args)
        if shapes not in self._shapes:
            specs = [jax.ShapeDtypeStruct(sh, dtype_of(s["dtype"])) for sh, s in zip(shapes, self.inputs, strict=True)]
            try:
                out = _as_list(jax.eval_shape(self._reference_fn(), *specs))
            except Exception as e:  # the reference rejects these shapes: so does the kernel
                raise ValueError(f"{self.name}(): the reference does not accept inputs of shapes {list(shapes)}: {e}") from e
            if len(out) != len(self.outputs):
                raise ValueError(f"{self.name}(): the reference returns {len(out)} outputs, the kernel {len(self.outputs)}")
            self._shapes[shapes] = [tuple(o.shape) for o in out]
        return self._shapes[shapes]

    def dtype_problem(self, args):
        """Why these arguments' dtypes are not the kernel's, or None."""
        for spec, a in zip(self.inputs, args, strict=True):
            want = dtype_of(spec["dtype"])
            have = getattr(a, "dtype", None)
            if have is None:
                if spec["shape"]:
                    return f"input {spec['name']} is a Python {type(a).__name__}, the kernel takes a {want} array"
                continue  # a Python scalar for a scalar input: converted
            if jnp.dtype(have) != want:
                return f"input {spec['name']} is {jnp.dtype(have)}, the kernel takes {want}"
        return None

    def outside(self, axes):
        """Why these axis values are outside the validated envelope, or None."""
        for axis, (lo, hi) in self.envelope.items():
            if not lo <= axes[axis] <= hi:
                return f"{axis}={axes[axis]} is outside the validated range {lo}..{hi}"
        return None

    def why_not(self, *args, any_shape=False, **axes):
        """Why ``apply`` would not use the kernel for these arguments (None: it would)."""
        found = self._why(args, axes, any_shape)
        return None if found is None else found[1]

    def _why(self, args, axes, any_shape=False):
        """(reason, message) when these arguments would not use the kernel, else None; the
        reason is one of ``disabled``, ``signature``, ``dtype``, ``shape``, ``unavailable``."""
        if disabled():
            return "disabled", f"{DISABLE_ENV} is set"
        try:
            values = self.bind(args, axes)
        except (TypeError, ValueError) as e:
            return "signature", str(e)
        problem = self.dtype_problem(args)
        if problem:
            return "dtype", problem
        problem = None if any_shape else self.outside(values)
        if problem:
            return "shape", problem
        status = self.status()
        return None if status == "ready" else ("unavailable", status)

    # -- calling -------------------------------------------------------------------------
    def __call__(self, *args, **axes):
        """The kernel for arguments inside the validated envelope; otherwise the task's reference."""
        values = self.bind(args, axes)
        problem = self.dtype_problem(args)
        if problem:
            raise TypeError(f"{self.name}(): {problem}")
        why = self._why(args, axes)
        if why is None:
            return self._invoke(args, values)
        self._note(why[0], f"{self.package}.{self.name}: using the JAX reference: {why[1]}")
        return self.reference(*args)

    def unchecked(self, *args, **axes):
        """The kernel for any shape its signature allows (outside the validated envelope too)."""
        values = self.bind(args, axes)
        problem = self.dtype_problem(args)
        if problem:
            raise TypeError(f"{self.name}(): {problem}")
        self.ensure()
        return self._invoke(args, values)

    def reference(self, *args):
        """The task's JAX reference (what the kernel was checked against)."""
        return self._reference_fn()(*args)

    def _reference_fn(self):
        if self._reference is None:
            ref = self.spec["reference"]
            module = _load_module(os.path.join(self.dir, "ref", ref["file"]), f"_ksmith_ref_{self.package}_{self.name}")
            self._reference = getattr(module, ref["function"])
        return self._reference

    def _invoke(self, args, axes, backward=None):
        """Runs the kernel; derivatives come from `backward` (default: the reference), since a
        kernel has no derivative rule of its own."""
        arrays = [jnp.asarray(a, dtype_of(s["dtype"])) for a, s in zip(args, self.inputs, strict=True)]
        single = len(self.outputs) == 1
        back = backward or self._reference_fn()

        def shaped(out):
            out = _as_list(out)
            return out[0] if single else tuple(out)

        @jax.custom_vjp
        def run(*xs):
            return shaped(self._fn(list(xs), axes))

        def forward(*xs):
            return run(*xs), xs

        def backward_pass(xs, g):
            _, vjp = jax.vjp(lambda *ys: shaped(back(*ys)), *xs)
            return vjp(g)

        run.defvjp(forward, backward_pass)
        return run(*arrays)

    def _note(self, reason, message):
        """A fallback: warned once per reason (a FallbackWarning, shown by default), every
        distinct message logged at INFO. The kill switch was set on purpose: logged only."""
        if reason not in self._warned and reason != "disabled":
            self._warned.add(reason)
            warnings.warn(message, FallbackWarning, stacklevel=3)
        if message not in self._noted:
            self._noted.add(message)
            log.info(message)

    # -- building ------------------------------------------------------------------------
    def status(self):
        """``"ready"``, or ``"unavailable: WHY"`` (building it first if needed)."""
        try:
            self.ensure()
            return "ready"
        except KernelUnavailable as e:
            return f"unavailable: {e}"

    def ensure(self):
        """Builds and registers the kernel once; raises KernelUnavailable with the reason."""
        with self._lock:
            if self._fn is None and self._unavailable is None:
                try:
                    self._verify_files()
                    self._fn = self._load()
                except (KernelUnavailable, OSError) as e:
                    self._unavailable = str(e)
                    # The one warning for this reason: later fallbacks because of it are quiet.
                    self._warned.add("unavailable")
                    warnings.warn(f"{self.package}.{self.name}: kernel unavailable, using the fallback: {e}", FallbackWarning, stacklevel=3)
            if self._unavailable is not None:
                raise KernelUnavailable(self._unavailable)

    def _verify_files(self):
        """Nothing changed since the export: every file of the kernel has the hash the export wrote."""
        for rel, want in sorted(self.spec["files"].items()):
            path = os.path.join(self.dir, rel)
            try:
                with open(path, "rb") as f:
                    have = hashlib.sha256(f.read()).hexdigest()
            except OSError as e:
                raise KernelUnavailable(f"{self.spec['dir']}/{rel} is missing from the export ({e.strerror}); re-export") from e
            if have != want:
                raise KernelUnavailable(f"{self.spec['dir']}/{rel} was changed after the export (its sha256 differs); re-export to use it")

    def _load(self):
        want = {"cpu_ffi": "cpu", "cuda_ffi": "gpu", "pallas": "gpu", "triton": "gpu"}[self.binding]
        have = jax.default_backend()
        if have != want:
            raise KernelUnavailable(f"it runs on JAX's {want} backend; the default backend here is {have}")
        if self.binding == "cpu_ffi":
            return self._ffi(self._build_native("cpu"), "cpu")
        if self.binding == "cuda_ffi":
            return self._ffi(self._build_native("cuda"), "CUDA")
        entry = self._entry_module()
        if self.binding == "pallas":
            return lambda arrays, axes: _as_list(entry(*arrays, *(axes[a] for a in self.axis_names)))
        return _TritonReplay(self, entry)

    def _entry_module(self):
        path = os.path.join(self.dir, "src", self.spec["sources"][0])
        try:
            module = _load_module(path, f"_ksmith_kernel_{self.package}_{self.name}")
        except Exception as e:  # an ImportError of triton/pallas, or any failure of the module itself
            raise KernelUnavailable(f"importing {os.path.basename(path)} failed: {type(e).__name__}: {e}") from e
        entry = getattr(module, self.spec["entry_point"], None)
        if not callable(entry):
            raise KernelUnavailable(f"{os.path.basename(path)} has no function {self.spec['entry_point']}")
        return entry

    def _build_native(self, device):
        """Compiles the kernel and its handler into one library (cached by content); loads it."""
        src = os.path.join(self.dir, "src")
        files = sorted(os.listdir(src))
        handler = self.spec["handler"]
        include = jax.ffi.include_dir()
        flags = list(self.spec["flags"])
        if device == "cpu":
            cc, cxx = os.environ.get("CC", "cc"), os.environ.get("CXX", "c++")
            for tool, var in ((cc, "CC"), (cxx, "CXX")):
                if shutil.which(tool) is None:
                    raise KernelUnavailable(f"no compiler `{tool}` (install gcc and g++, or set {var})")
            objects = []
            steps = []
            for f in files:
                if f.endswith(".c"):
                    obj = f[:-2] + ".o"
                    objects.append(obj)
                    steps.append([cc, "-O3", "-march=native", "-fopenmp", "-fPIC", "-include", "ksmith_abi.h", *flags, "-c", f, "-o", obj])
            steps.append([cxx, "-std=c++17", "-O2", "-fPIC", f"-I{include}", "-c", handler, "-o", "ffi_handler.o"])
            steps.append([cxx, "-shared", "-fopenmp", *objects, "ffi_handler.o", "-o", "lib.so"])
            versions = [_tool_version(cc), _tool_version(cxx)]
        else:
            nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or _wheel_nvcc()
            if not nvcc:
                raise KernelUnavailable("no nvcc (install the CUDA toolkit or the nvidia-cuda-nvcc wheel, or set NVCC)")
            cu = [f for f in files if f.endswith(".cu")]
            steps = [[nvcc, "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", f"-I{include}", *flags, *cu, handler, "-o", "lib.so"]]
            versions = [_tool_version(nvcc)]
        digest = hashlib.sha256()
        for part in [json.dumps(steps), *versions, jax.__version__, sys.platform]:
            digest.update(part.encode() + b"\0")
        for f in files:
            with open(os.path.join(src, f), "rb") as fh:
                digest.update(f.encode() + b"\0" + fh.read() + b"\0")
        with open(os.path.join(self.dir, handler), "rb") as fh:
            digest.update(fh.read())
        cache = _cache_dir()
        final = os.path.join(cache, f"{self.name}-{digest.hexdigest()[:24]}")
        lib = os.path.join(final, "lib.so")
        if not os.path.exists(lib):
            try:
                os.makedirs(cache, exist_ok=True)
                work = tempfile.mkdtemp(prefix=f".{self.name}-", dir=cache)
                os.chmod(work, 0o755)  # a shared cache: other users load what is built here
            except OSError as e:
                raise KernelUnavailable(f"cannot use the build cache {cache} ({e.strerror}); set {CACHE_ENV}") from e
            try:
                for f in files:
                    shutil.copy(os.path.join(src, f), work)
                shutil.copy(os.path.join(self.dir, handler), work)
                for cmd in steps:
                    try:
                        out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
                    except (OSError, subprocess.TimeoutExpired) as e:
                        raise KernelUnavailable(f"build failed: {' '.join(cmd)}: {e}") from e
                    if out.returncode != 0:
                        lines = (out.stderr or out.stdout).strip().splitlines()
                        errors = [ln for ln in lines if "error" in ln.lower()]
                        shown = "\n".join(errors[:8] if errors else lines[-15:])
                        raise KernelUnavailable(f"build failed ({os.path.basename(cmd[0])} exited {out.returncode}): {' '.join(cmd)}\n{shown}")
                try:
                    os.rename(work, final)  # atomic; another process may have won the race
                except OSError:
                    if not os.path.exists(lib):
                        raise
            finally:
                if os.path.exists(work):
                    shutil.rmtree(work, ignore_errors=True)
        try:
            return ctypes.CDLL(lib)
        except OSError as e:
            raise KernelUnavailable(f"loading {lib} failed: {e}") from e

    def _ffi(self, lib, platform):
        target = self.spec["target"]
        with _register_lock:
            if (target, platform) not in _registered:
                handler = getattr(lib, self.spec["symbol"])
                jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler), platform=platform)
                _registered.add((target, platform))

        def call(arrays, axes):
            out_types = [jax.ShapeDtypeStruct(tuple(axes[a] for a in o["shape"]), dtype_of(o["dtype"])) for o in self.outputs]
            # vmap: one call per batch element; the kernel's C ABI has no batch axis.
            fn = jax.ffi.ffi_call(target, out_types, vmap_method="sequential")
            return fn(*arrays, **{a: np.int64(axes[a]) for a in self.axis_names})

        return call


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


class _Placeholder:
    """Stands for a tensor while a Triton launcher runs; records nothing but its identity."""

    def __init__(self, index, shape, dtype):
        self.index, self.shape, self.dtype = index, tuple(shape), dtype

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def size(self, d=None):
        return self.shape if d is None else self.shape[d]

    def dim(self):
        return len(self.shape)

    def stride(self, d=None):
        strides, acc = [], 1
        for n in reversed(self.shape):
            strides.insert(0, acc)
            acc *= n
        return tuple(strides) if d is None else strides[d]

    def is_contiguous(self):
        return True

    def data_ptr(self):
        raise KernelUnavailable("the Triton launcher reads a raw pointer; only launches of @triton.jit kernels can be replayed in JAX")


class _TritonReplay:
    """A Triton destination-passing launcher, replayed in JAX: the launcher runs once per shape on
    placeholders, each ``kernel[grid](...)`` it makes is recorded, and the launches are replayed
    through ``jax_triton.triton_call`` (outputs threaded from one launch to the next)."""

    def __init__(self, kernel, entry):
        try:
            import jax_triton  # noqa: F401
            from triton.runtime.jit import KernelInterface  # noqa: F401
        except ImportError as e:
            raise KernelUnavailable(f"Triton kernels need triton and jax-triton (pip install jax-triton): {e}") from e
        self.kernel, self.entry = kernel, entry

    def _record(self, axes):
        from triton.runtime.jit import KernelInterface

        k = self.kernel
        specs = list(k.inputs) + list(k.outputs)
        holders = [_Placeholder(i, [axes[a] for a in s["shape"]], dtype_of(s["dtype"])) for i, s in enumerate(specs)]
        launches = []
        original = KernelInterface.__getitem__

        def recorder(self_, grid):
            return lambda *a, **kw: launches.append((self_, grid, a, kw))

        with _patched(KernelInterface, "__getitem__", recorder, original):
            self.entry(*holders, *(axes[a] for a in k.axis_names))
        return launches

    def __call__(self, arrays, axes):
        import jax_triton as jt

        k = self.kernel
        current = list(arrays) + [None] * len(k.outputs)
        n_in = len(arrays)
        for fn, grid, a, kw in self._record(axes):
            names = _triton_param_names(fn)
            bound = dict(zip(names, a, strict=False))
            bound.update(kw)
            operands, out_types, out_slots, aliases = {}, [], [], {}
            for name, v in bound.items():
                if isinstance(v, _Placeholder) and v.index >= n_in:
                    if current[v.index] is None:
                        out_types.append(jax.ShapeDtypeStruct(v.shape, v.dtype))
                        out_slots.append(v.index)
                        continue
                    # An output an earlier launch wrote: passed in and aliased to a new output.
                    aliases[len(operands)] = len(out_types)
                    out_types.append(jax.ShapeDtypeStruct(v.shape, v.dtype))
                    out_slots.append(v.index)
                    operands[name] = current[v.index]
                elif isinstance(v, _Placeholder):
                    operands[name] = current[v.index]
                else:
                    operands[name] = v
            outs = jt.triton_call(kernel=fn, out_type=out_types, grid=grid, input_output_aliases=aliases or None, **operands)
            for slot, value in zip(out_slots, _as_list(outs), strict=True):
                current[slot] = value
        missing = [o["name"] for o, v in zip(k.outputs, current[n_in:], strict=True) if v is None]
        if missing:
            raise KernelUnavailable(f"the Triton launcher never wrote output {', '.join(missing)}")
        return current[n_in:]


def _triton_param_names(fn):
    base = getattr(fn, "fn", fn)
    return list(getattr(base, "arg_names", None) or [p.name for p in base.params])


@contextlib.contextmanager
def _patched(cls, attr, value, original):
    setattr(cls, attr, value)
    try:
        yield
    finally:
        setattr(cls, attr, original)


class Package:
    """The kernels of one export, read from its manifest."""

    def __init__(self, name, init_file):
        self.name = name
        self.root = os.path.dirname(os.path.abspath(init_file))
        path = os.path.join(self.root, "manifest.json")
        try:
            with open(path, encoding="utf-8") as f:
                manifest = json.load(f)
        except OSError as e:
            raise ExportError(f"{path}: {e.strerror}; re-export") from e
        except ValueError as e:
            raise ExportError(f"{path}: not valid JSON ({e}); re-export") from e
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            got = manifest.get("format") if isinstance(manifest, dict) else None
            raise ExportError(f"{path}: format {got!r}, this runtime reads {FORMAT}; re-export with this ksmith")
        kernels = manifest.get("kernels")
        if not isinstance(kernels, dict) or not kernels:
            raise ExportError(f"{path}: kernels: expected a non-empty table; re-export")
        for n, spec in kernels.items():
            _check_spec(f"{path}: kernels.{n}", spec)
        self.manifest = manifest
        self.kernels = {n: _kernel_class(name, n, spec)(name, n, spec, self.root) for n, spec in manifest["kernels"].items()}

    def kernel(self, name):
        """The kernel named NAME (its task's name)."""
        try:
            return self.kernels[name]
        except KeyError:
            raise KeyError(f"{self.name} has no kernel {name!r} (it has: {', '.join(sorted(self.kernels))})") from None

    def build(self, names=None):
        """Builds the kernels now (all, or the ones named); returns {name: status}."""
        return {n: self.kernel(n).status() for n in (names or sorted(self.kernels))}

    def status(self):
        """{name: "ready" | "unavailable: WHY"}, building what is not built yet."""
        return self.build()

    def apply(self, name, *, any_shape=False):
        """Decorator: calls to the function go to kernel NAME when the arguments fit what was
        validated (same dtypes; axes inside the validated range, or any shape with
        ``any_shape=True``), and to the function itself otherwise."""
        k = self.kernel(name)

        def decorate(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                if kwargs:
                    return fn(*args, **kwargs)
                why = k._why(args, {}, any_shape)
                if why is not None:
                    k._note(why[0], f"{k.package}.{name}: calling {getattr(fn, '__qualname__', fn)}: {why[1]}")
                    return fn(*args)
                # Derivatives through the decorated function, as if it had run.
                return k._invoke(args, k.bind(args), backward=fn)

            wrapper.ksmith_kernel = k
            wrapper.why_not = functools.partial(k.why_not, any_shape=any_shape)
            return wrapper

        return decorate
