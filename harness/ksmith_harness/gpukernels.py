"""GPU candidates in the untrusted runner: Triton and CUDA on device buffers (torch), timed with
CUDA events around each call and a device-wide synchronization that covers every stream.

Only imported on machines with a GPU (torch is preinstalled there). The host-side slots of
`runner.Kernel` keep the inputs as read from disk; each slot gets device copies, outputs are
poisoned on the device before every call, and `dump` copies outputs (and the inputs, to catch
mutation) back to the host.
"""

import ctypes
import os

import numpy as np

from . import hostwork, tensors
from .protocol import HarnessError
from .pykernels import _call, _import_candidate
from .runner import CTYPES, Kernel, _same_bytes

try:
    import torch
except ImportError as e:  # pragma: no cover - GPU machines only
    raise HarnessError(f"the GPU runner needs torch: {e}") from None

_TORCH = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.uint8,
}
# Same-width signed integer views for writing poison bit patterns.
_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _signed(bits, width):
    return bits - (1 << (8 * width)) if bits >= 1 << (8 * width - 1) else bits


def _to_device(buf, dtype_name):
    host = buf.view(np.uint16) if dtype_name == "bfloat16" else buf
    t = torch.from_numpy(np.ascontiguousarray(host)).to("cuda")
    return t.view(torch.bfloat16) if dtype_name == "bfloat16" else t


def _to_host(t, buf, dtype_name):
    if dtype_name == "bfloat16":
        np.copyto(buf.view(np.uint16), t.view(torch.int16).cpu().numpy().view(np.uint16))
    else:
        np.copyto(buf, t.cpu().numpy())


class DeviceKernel(Kernel):
    """Shared device-buffer handling for Triton and CUDA on a GPU."""

    def __init__(self, req):
        super().__init__(req)
        if not torch.cuda.is_available():
            raise HarnessError("no CUDA device visible to the runner")
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def slot(self, idx, req, path):
        s = super().slot(idx, req, path)
        if s.get("dev_key") != (s["key"], s["shape_key"]):
            s["dev_ins"] = [_to_device(b, i["dtype"]) if i["shape"] else b.reshape(()).item() for b, i in zip(s["ins"], self.inputs, strict=False)]
            s["dev_outs"] = [torch.empty(b.shape, dtype=_TORCH[o["dtype"]], device="cuda") for b, o in zip(s["outs"], self.outputs, strict=False)]
            s["dev_key"] = (s["key"], s["shape_key"])
        return s

    def call(self, s, axes):
        for t, o in zip(s["dev_outs"], self.outputs, strict=False):
            _uint, bits = tensors.POISON_BITS[o["dtype"]]
            width = t.element_size()
            t.view(_INT_VIEW[width]).fill_(_signed(bits, width))
        torch.cuda.synchronize()
        self.start.record()
        self.launch(s, axes)
        self.end.record()
        # Device-wide: work launched on any stream has finished before the result is used.
        torch.cuda.synchronize()
        return int(self.start.elapsed_time(self.end) * 1e6)

    def refresh(self, s):
        """Timed calls: the judge wrote fresh inputs into the host slot; copy them over, poison
        the device outputs and evict L2, all before the judge's clock starts."""
        s["dev_ins"] = [_to_device(b, i["dtype"]) if i["shape"] else b.reshape(()).item() for b, i in zip(s["ins"], self.inputs, strict=False)]
        if "dev_outs" not in s:
            s["dev_outs"] = [torch.empty(b.shape, dtype=_TORCH[o["dtype"]], device="cuda") for b, o in zip(s["outs"], self.outputs, strict=False)]
            s["l2"] = torch.empty((256 << 20) // 4, dtype=torch.float32, device="cuda")
        for t, o in zip(s["dev_outs"], self.outputs, strict=False):
            _uint, bits = tensors.POISON_BITS[o["dtype"]]
            width = t.element_size()
            t.view(_INT_VIEW[width]).fill_(_signed(bits, width))
        s["l2"].fill_(0.0)
        torch.cuda.synchronize()

    def invoke(self, s, axes):
        self.launch(s, axes)
        # Device-wide: work launched on any stream has finished before the clock stops.
        torch.cuda.synchronize()
        return 0

    def collect(self, s):
        """Outputs (and inputs, to catch mutation) back into the host slot for the judge."""
        for t, buf, o in zip(s["dev_outs"], s["outs"], self.outputs, strict=False):
            _to_host(t, buf, o["dtype"])
        for t, buf, i in zip(s["dev_ins"], s["ins"], self.inputs, strict=False):
            if i["shape"]:
                _to_host(t, buf, i["dtype"])

    def launch(self, s, axes):
        raise NotImplementedError

    def profiled_call(self, s, axes):
        """One call under the CUDA profiler: which device kernels actually ran (names)."""
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            elapsed = self.call(s, axes)
        cuda = torch.autograd.DeviceType.CUDA
        names = sorted({e.name for e in prof.events() if e.device_type == cuda})
        return elapsed, names

    def dump(self, s, prefix):
        for t, buf, o in zip(s["dev_outs"], s["outs"], self.outputs, strict=False):
            _to_host(t, buf, o["dtype"])
        paths, changed = super().dump(s, prefix)
        # Compare what is on the device now with the host copy (the kernel never sees it), so a
        # kernel that mutates its inputs is caught.
        for t, buf, inp in zip(s["dev_ins"], s["ins"], self.inputs, strict=False):
            if inp["shape"] and inp["name"] not in changed:
                now = np.empty_like(buf)
                _to_host(t, now, inp["dtype"])
                if not _same_bytes(now, buf):
                    changed.append(inp["name"])
        return paths, changed


# Torch calls on task data that compute nothing: views, indexing, copies, casts, layout and
# selection (metadata calls return no tensor and are free anyway).
TORCH_FREE = frozenset(
    """__get__ __getitem__ __setitem__ __iter__ __len__ __format__ __repr__ view view_as reshape
    reshape_as flatten unflatten squeeze unsqueeze permute transpose t contiguous clone detach
    copy_ to type float double half bfloat16 int long short char byte bool cuda cpu expand
    expand_as broadcast_to narrow select index_select gather take cat concat concatenate stack
    hstack vstack split chunk unbind tensor_split movedim swapaxes swapdims flip roll repeat tile
    pad as_strided where masked_select fill_ zero_ requires_grad_ record_stream""".split()
)
# Allocations shaped like task data hold none of it.
TORCH_ALLOC = frozenset(
    """empty_like zeros_like ones_like full_like new_empty new_zeros new_ones new_full
    empty_strided new_empty_strided""".split()
)
# Task data handed to host Python, where the watch cannot follow it: counted.
TORCH_EXPORT = frozenset("tolist numpy item __array__ __float__ __int__ __index__ __bool__".split())


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, tuple | list):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


class TorchWatch(torch.overrides.TorchFunctionMode):
    """The torch calls of a correctness call's host code (written for GPUs, not yet run on
    one): a call on task data (the entry's tensors, and tensors derived from them) that returns
    a tensor or works in place and is no view, copy, cast or allocation is host work, counted
    in elements of its largest tensor. The watch never changes what a call does: its own
    bookkeeping failing only loses a finding."""

    def __init__(self, tensors, module_dir):
        super().__init__()
        self.data = {id(t): t for t in tensors}  # references kept, so no id is reused meanwhile
        self.module_dir = module_dir
        self.ops = []
        self.total = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._see(func, args, kwargs, out)
        except Exception:
            pass
        return out

    def _see(self, func, args, kwargs, out):
        ins = [t for t in _tensors((args, kwargs)) if id(t) in self.data]
        if not ins:
            return
        name = getattr(func, "__name__", "")
        if name in TORCH_ALLOC:
            return
        outs = list(_tensors(out))
        for t in outs:
            self.data[id(t)] = t
        inplace = name.endswith("_") or name.startswith("__i")
        if name in TORCH_FREE or (not outs and not inplace and name not in TORCH_EXPORT):
            return
        big = max(ins + outs, key=lambda t: t.numel())
        shape = f"{str(big.dtype).removeprefix('torch.')}{list(big.shape)}"
        self.ops.append((big.numel(), len(self.ops), f"`{name}` ({shape})", hostwork.caller(self.module_dir), ""))
        self.total += big.numel()


class TritonGpuKernel(DeviceKernel):
    """Triton on a GPU: entry(*inputs, *outputs, *axes) with torch CUDA tensors."""

    def __init__(self, req):
        super().__init__(req)
        os.environ.pop("TRITON_INTERPRET", None)
        self.module = req["module"]
        self.entry = _import_candidate(req)
        self.watch = None
        self.found = []

    def call(self, s, axes):
        """Correctness calls: the host code's torch calls are watched (never timed calls)."""
        module_dir, entry_file = os.path.dirname(self.module), os.path.basename(self.module)
        self.watch = TorchWatch([t for t in s["dev_ins"] + s["dev_outs"] if isinstance(t, torch.Tensor)], module_dir)
        try:
            return super().call(s, axes)
        finally:
            w, self.watch = self.watch, None
            limit = hostwork.allowance([b.shape for b in s["ins"]] + [b.shape for b in s["outs"]])
            self.found = hostwork.report(w.ops, w.total, limit, module_dir, entry_file, "inside a Triton kernel")

    def host_found(self):
        return self.found

    def launch(self, s, axes):
        if self.watch is None:
            _call(self.entry, *s["dev_ins"], *s["dev_outs"], *axes)
            return
        with self.watch:
            _call(self.entry, *s["dev_ins"], *s["dev_outs"], *axes)


class CudaKernel(DeviceKernel):
    """A CUDA shared library: extern "C" ENTRY(device pointers..., int64 axes) on the default stream."""

    def __init__(self, req):
        super().__init__(req)
        self.lib = ctypes.CDLL(req["library"], mode=os.RTLD_LOCAL | os.RTLD_NOW)
        try:
            self.fn = getattr(self.lib, req["entry"])
        except AttributeError:
            raise HarnessError(f"entry point {req['entry']!r} not exported by the library") from None
        self.fn.restype = None

    def launch(self, s, axes):
        args = []
        for t, inp in zip(s["dev_ins"], self.inputs, strict=False):
            args.append(ctypes.c_void_p(t.data_ptr()) if inp["shape"] else CTYPES[inp["dtype"]](t))
        args += [ctypes.c_void_p(t.data_ptr()) for t in s["dev_outs"]]
        args += [ctypes.c_int64(a) for a in axes]
        self.fn(*args)  # launch errors surface at the device synchronization in call()
