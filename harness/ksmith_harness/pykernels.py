"""Python candidates in the untrusted runner: Triton and Pallas modules.

Without an accelerator both run in their interpreters (correctness only; the judge reports
timing as unavailable). Triton's interpreter gets numpy buffers through a small torch-like
adapter, so no torch is needed on CPU machines.
"""

import importlib.util
import os
import sys
import time

import numpy as np

from . import hostwork
from .protocol import HarnessError
from .runner import Kernel


def _import_candidate(req):
    path = req["module"]
    spec = importlib.util.spec_from_file_location("ksmith_candidate", path)
    if spec is None or spec.loader is None:
        raise HarnessError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))  # helper modules next to the entry file
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise HarnessError(f"candidate raised while importing: {type(e).__name__}: {e}") from None
    entry = getattr(module, req["entry"], None)
    if not callable(entry):
        raise HarnessError(f"entry point {req['entry']!r} is not a function of {os.path.basename(path)}")
    return entry


def _call(fn, *args):
    try:
        return fn(*args)
    except hostwork.HostCompute:
        raise
    except Exception as e:
        raise HarnessError(f"candidate raised: {type(e).__name__}: {e}") from None


# Triton's interpreter reads a tensor's dtype as torch spells it.
_TORCH_NAMES = {
    "float32": "torch.float32",
    "float64": "torch.float64",
    "float16": "torch.float16",
    "bfloat16": "torch.bfloat16",
    "int8": "torch.int8",
    "int16": "torch.int16",
    "int32": "torch.int32",
    "int64": "torch.int64",
    "uint8": "torch.uint8",
    "bool": "torch.uint8",
}


class _Storage:
    """The storage of an adapted tensor: the numpy buffer itself (host memory is the device)."""

    def __init__(self, base):
        self.base = base

    def data_ptr(self):
        return self.base.ctypes.data

    def cpu(self):
        return self

    def copy_(self, other):
        if other.base is not self.base:
            np.copyto(self.base, other.base)
        return self


class NumpyTensor:
    """Just enough of a torch tensor for Triton's interpreter, over a C-contiguous numpy array.

    It computes nothing: host code that applies an operator, a numpy or torch function or a
    math method to one is reported as host compute (`hostwork`) where it used to fail as an
    exception. Indexing gives a view (still task data)."""

    device = "cpu"

    def __init__(self, arr, dtype_name, label="a tensor"):
        self.arr = arr
        self.dtype = _TORCH_NAMES[dtype_name]
        self._dtype_name = dtype_name
        self.shape = arr.shape
        self._label = label

    def _trip(self, what):
        w = hostwork.watching()
        if w is None:
            raise TypeError(f"{what} is not supported on the harness's tensors")
        w.trip(what, f"`{self._label}` ({self._dtype_name}{list(self.arr.shape)})")

    def __getitem__(self, idx):
        if isinstance(idx, NumpyTensor):
            idx = idx.arr
        elif isinstance(idx, tuple):
            idx = tuple(i.arr if isinstance(i, NumpyTensor) else i for i in idx)
        return NumpyTensor(self.arr[idx], self._dtype_name, f"{self._label}[...]")

    def __getattr__(self, name):
        # Only names the class lacks get here: torch's math methods are host compute.
        if name in TENSOR_MATH:
            return lambda *_a, **_k: self._trip(f"`.{name}()`")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __array_ufunc__(self, ufunc, _method, *_inputs, **_kwargs):
        self._trip(f"numpy `{ufunc.__name__}`")

    def __array_function__(self, func, _types, _args, _kwargs):
        self._trip(f"`numpy.{func.__name__}`")

    @classmethod
    def __torch_function__(cls, func, _types, args=(), kwargs=None):
        first = next((a for a in list(args) + list((kwargs or {}).values()) if isinstance(a, NumpyTensor)), None)
        if first is None:
            raise TypeError(f"{getattr(func, '__name__', func)} is not supported on the harness's tensors")
        first._trip(f"`torch.{getattr(func, '__name__', func)}`")

    def data_ptr(self):
        return self.arr.ctypes.data

    def untyped_storage(self):
        return _Storage(self.arr)

    def new_empty(self, *_args, **_kwargs):
        return NumpyTensor(self.arr[:0], self._dtype_name)

    def set_(self, storage, _offset, _size, _stride):
        self.arr = storage.base
        self.shape = self.arr.shape
        return self

    def copy_(self, _other):
        return self

    def storage_offset(self):
        return 0

    def size(self, d=None):
        return self.arr.shape if d is None else self.arr.shape[d]

    def stride(self, d=None):
        st = tuple(x // self.arr.itemsize for x in self.arr.strides)
        return st if d is None else st[d]

    def numel(self):
        return self.arr.size

    def dim(self):
        return self.arr.ndim

    def element_size(self):
        return self.arr.itemsize

    def is_contiguous(self):
        return self.arr.flags.c_contiguous


# Operators a host expression may apply to a tensor, and what the finding calls them.
_OPERATORS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "matmul": "@",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "and": "&",
    "or": "|",
    "xor": "^",
    "lshift": "<<",
    "rshift": ">>",
}
_UNARY = {"__neg__": "-", "__pos__": "+", "__abs__": "abs()", "__invert__": "~"}
_COMPARE = {"__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}
# Torch tensor methods that compute (reached through `__getattr__`, which the adapter's own
# attributes never hit).
TENSOR_MATH = frozenset(
    """sum mean max min prod amax amin argmax argmin cumsum cumprod logsumexp norm var std
    exp exp2 log log2 log1p expm1 sqrt rsqrt square abs neg sign pow reciprocal sin cos tanh
    sigmoid relu softmax log_softmax erf floor ceil round trunc clamp clip maximum minimum
    add sub mul div true_divide remainder fmod matmul mm bmm mv dot addmm baddbmm outer
    add_ sub_ mul_ div_ pow_ clamp_ exp_ sqrt_ relu_ sort topk masked_fill where lerp any all
    eq ne lt le gt ge""".split()
)


def _install_operators():
    def op(symbol):
        return lambda self, *_a, **_k: self._trip(f"`{symbol}`")

    for name, symbol in _OPERATORS.items():
        for dunder in (f"__{name}__", f"__r{name}__", f"__i{name}__"):
            setattr(NumpyTensor, dunder, op(symbol))
    for dunder, symbol in {**_UNARY, **_COMPARE}.items():
        setattr(NumpyTensor, dunder, op(symbol))


_install_operators()


class TritonKernel(Kernel):
    """A Triton module: entry(*inputs, *outputs, *axes) in destination-passing style."""

    def __init__(self, req):
        super().__init__(req)
        self.interpreted = not req.get("device_gpu", False)
        if self.interpreted:
            os.environ["TRITON_INTERPRET"] = "1"
        try:
            import triton  # noqa: F401
        except ImportError as e:
            raise HarnessError(f"triton is not installed in the harness environment: {e}") from None
        self.module = req["module"]
        self.entry = _import_candidate(req)

    def call(self, s, axes):
        # A fresh record of this call's host compute (the adapted tensors report to it).
        hostwork.WATCH["w"] = hostwork.Watch(os.path.dirname(self.module), os.path.basename(self.module))
        return super().call(s, axes)

    def host_found(self):
        w = hostwork.watching()
        return w.found if w is not None else []

    def invoke(self, s, axes):
        if not self.interpreted:
            raise HarnessError("Triton on a GPU needs the GPU runner path (torch tensors)")
        ins = [NumpyTensor(b, i["dtype"], i["name"]) if i["shape"] else b.reshape(()).item() for b, i in zip(s["ins"], self.inputs, strict=False)]
        outs = [NumpyTensor(b, o["dtype"], o["name"]) for b, o in zip(s["outs"], self.outputs, strict=False)]
        t0 = time.perf_counter_ns()
        _call(self.entry, *ins, *outs, *axes)
        return time.perf_counter_ns() - t0


class PallasKernel(Kernel):
    """A Pallas module: entry(*inputs, *axes) -> output or tuple of outputs, under jax.jit."""

    def __init__(self, req):
        super().__init__(req)
        import functools

        import jax
        from jax.experimental import pallas as pl

        self.jax = jax
        self.interpreted = jax.default_backend() == "cpu"
        if self.interpreted:
            # No accelerator: every pallas_call runs in interpret mode.
            pl.pallas_call = functools.partial(pl.pallas_call, interpret=True)
        self.module = req["module"]
        self.entry = _import_candidate(req)
        self.jitted = {}
        self.inspected = {}
        self.mismatch = None

    def _fn(self, axes):
        """The jitted entry for these axis values (one trace per workload, reused)."""
        key = tuple(axes)
        fn = self.jitted.get(key)
        if fn is None:
            entry = self.entry
            fn = self.jax.jit(lambda *ins: entry(*ins, *axes))
            self.jitted[key] = fn
        return fn

    def inspect(self, s, axes):
        """Host work in the traced entry, once per workload, before its first call: the same
        Python on the same shapes as jit traces for the calls (checked and timed). A trace of
        its own (make_jaxpr): with jit's own trace (`.trace()`) reused by the call, XLA's
        YNNPACK failed to read /proc/cpuinfo in the sandbox and an honest rmsnorm's float32
        sum of squares failed with "unsupported parameter" (5 of 6 runs; never with a trace
        of its own, 7 runs)."""
        key = (tuple(axes), s["shape_key"])
        if key not in self.inspected:
            self.inspected[key] = self._host_work(s, axes)
        return self.inspected[key]

    def _host_work(self, s, axes):
        specs = [self.jax.ShapeDtypeStruct(b.shape, b.dtype) for b in s["ins"]]
        try:
            entry = self.entry
            traced = self.jax.make_jaxpr(lambda *ins: entry(*ins, *axes))(*specs)
        except Exception:
            return []  # the call raises it again, and it is reported as the candidate's exception
        limit = hostwork.allowance([b.shape for b in s["ins"]] + [b.shape for b in s["outs"]])
        try:
            return hostwork.pallas_findings(traced, limit, os.path.dirname(self.module), os.path.basename(self.module))
        except Exception as e:  # the check's own failure must not fail a candidate
            print(f"ksmith: the host-work check did not run: {type(e).__name__}: {e}", file=sys.stderr)
            return []

    def invoke(self, s, axes):
        fn = self._fn(axes)
        if s.get("dev_key") != (s["key"], s["shape_key"]):
            # Inputs live on the device across calls, like the baseline's.
            s["dev_ins"] = [self.jax.device_put(b) for b in s["ins"]]
            s["dev_key"] = (s["key"], s["shape_key"])
        t0 = time.perf_counter_ns()
        result = _call(lambda: self.jax.block_until_ready(fn(*s["dev_ins"])))
        elapsed = time.perf_counter_ns() - t0
        s["results"] = result if isinstance(result, tuple | list) else (result,)
        return elapsed

    def call(self, s, axes):
        elapsed = super().call(s, axes)
        self.collect(s)
        return elapsed

    def refresh(self, s):
        """Timed calls: the judge wrote fresh inputs into the host slot; put them on the device
        and, on an accelerator, evict L2, before the judge's clock starts."""
        s["dev_ins"] = self.jax.block_until_ready([self.jax.device_put(b) for b in s["ins"]])
        s["dev_key"] = (s["key"], s["shape_key"])
        if not self.interpreted:
            jnp = self.jax.numpy
            if "l2" not in s:
                s["l2"] = jnp.zeros((256 << 20) // 4, jnp.float32)
            s["l2"] = self.jax.block_until_ready(s["l2"] + 1.0)

    def collect(self, s):
        """The last call's results into the slot's host buffers (checked shapes and dtypes)."""
        results = s.pop("results")
        if len(results) != len(self.outputs):
            raise HarnessError(f"candidate returned {len(results)} outputs, expected {len(self.outputs)}")
        for buf, out, got in zip(s["outs"], self.outputs, results, strict=False):
            got = np.asarray(got)
            if got.shape != buf.shape:
                raise HarnessError(f"shape mismatch: output {out['name']} has shape {list(got.shape)}, expected {list(buf.shape)}")
            if got.dtype != buf.dtype:
                raise HarnessError(f"dtype mismatch: output {out['name']} is {got.dtype}, expected {out['dtype']}")
            np.copyto(buf, got)
