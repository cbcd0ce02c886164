"""Untrusted runner: loads one candidate library and calls it on inputs prepared by the trusted side.

Runs inside the sandbox. It never sees reference outputs and never judges anything: it writes
raw outputs to files that the trusted server checks. The kernel's stdout/stderr go to the log;
the protocol uses private copies of the original pipes.
"""

import ctypes
import json
import math
import mmap
import os
import select
import signal
import time

import numpy as np

from . import PROTOCOL, tensors
from .protocol import HarnessError, serve

CTYPES = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "bool": ctypes.c_uint8,
    "bfloat16": ctypes.c_uint16,
}


class Kernel:
    """The loaded entry point and the buffers it is called with (shared by every backend)."""

    interpreted = False

    def __init__(self, req):
        self.inputs = req["inputs"]
        self.outputs = req["outputs"]
        # slot -> {"key", "shape_key", "ins", "outs"}; slot buffers keep their addresses across
        # seeds so kernels that cache results by pointer are caught.
        self.slots = {}
        # Timing slots shared with the judge, by their files and shapes; the files' mappings.
        self.shared = {}
        self.maps = {}

    def slot(self, idx, req, path):
        """Slot `idx`'s buffers for these shapes, holding the inputs of file `path`. With a
        `slot` in the request (the judge's files, as for timed calls) they are mappings of
        those files, so correctness runs and timed calls see the same kind of memory."""
        shapes_in, shapes_out = req["in_shapes"], req["out_shapes"]
        spec = req.get("slot")
        shape_key = (tuple(map(tuple, shapes_in)), tuple(map(tuple, shapes_out)), repr(spec))
        s = self.slots.get(idx)
        if s is None or s["shape_key"] != shape_key:
            if spec:
                ins = [_view(self, p, i, sh) for p, i, sh in zip(spec["ins"], self.inputs, shapes_in, strict=True)]
                outs = [_view(self, p, o, sh) for p, o, sh in zip(spec["outs"], self.outputs, shapes_out, strict=True)]
            else:
                ins = [np.empty(sh, tensors.np_dtype(i["dtype"])) for i, sh in zip(self.inputs, shapes_in, strict=False)]
                outs = [np.empty(sh, tensors.np_dtype(o["dtype"])) for o, sh in zip(self.outputs, shapes_out, strict=False)]
            s = {"key": None, "shape_key": shape_key, "ins": ins, "outs": outs}
            self.slots[idx] = s
        if s["key"] != path:
            _read_into(path, {f"in.{i['name']}": buf for buf, i in zip(s["ins"], self.inputs, strict=False)})
            s["key"] = path
        return s

    def call(self, s, axes):
        """Poisons the outputs, then calls the candidate once (correctness runs)."""
        for buf, out in zip(s["outs"], self.outputs, strict=False):
            tensors.poison(buf, out["dtype"])
        return self.invoke(s, axes)

    def inspect(self, _s, _axes):
        """Host work found before calling (Pallas: in the traced program): a list of
        {file, line, message}, reported instead of running the call."""
        return []

    def host_found(self):
        """Host work the last correctness call did outside its kernels (Triton: arithmetic on
        the task's tensors), as `inspect` reports it."""
        return []

    def refresh(self, s):
        """Before a timed call: the judge has written the slot's host buffers (device backends
        copy them to the device here)."""

    def collect(self, s):
        """After a timed call: outputs back in the slot's host buffers (device backends)."""

    def invoke(self, s, axes):
        raise NotImplementedError

    def dump(self, s, prefix):
        """Writes the outputs next to `prefix`; returns their paths and the inputs the call
        changed (compared with the input file read again: cheaper than hashing them)."""
        paths = {}
        for buf, out in zip(s["outs"], self.outputs, strict=False):
            p = f"{prefix}.{out['name']}.bin"
            buf.tofile(p)
            paths[out["name"]] = p
        bufs = {i["name"]: b for i, b in zip(self.inputs, s["ins"], strict=True)}
        return paths, _changed_inputs(s["key"], bufs)


def _same_bytes(a, b):
    """Whether two arrays hold the same bytes (NaN payloads included)."""
    return np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


def _layout(f):
    """A safetensors file's header (name -> dtype, shape, data_offsets) and where its data
    starts: 8 bytes of header length, the JSON header, the raw data."""
    (n,) = np.frombuffer(f.read(8), dtype="<u8")
    return json.loads(f.read(int(n))), 8 + int(n)


def _span(path, header, name, buf):
    """Byte offsets of tensor `name`, checked against the buffer meant to hold it."""
    begin, end = header[name]["data_offsets"]
    if end - begin != buf.nbytes:
        raise HarnessError(f"{os.path.basename(path)}: {name} holds {end - begin} bytes, expected {buf.nbytes}")
    return begin


def _read_into(path, bufs):
    """Reads the named tensors of a safetensors file straight into `bufs` (name -> array): no
    intermediate array per input, which cost more than the copy (a fresh allocation's page
    faults)."""
    with open(path, "rb") as f:
        header, data = _layout(f)
        for name, buf in bufs.items():
            f.seek(data + _span(path, header, name, buf))
            if buf.nbytes and f.readinto(memoryview(buf.reshape(-1).view(np.uint8))) != buf.nbytes:
                raise HarnessError(f"{os.path.basename(path)}: {name} is cut short")


# Bytes compared at a time by `_changed_inputs` (one small buffer, reused).
_COMPARE_CHUNK = 1 << 20


def _changed_inputs(path, bufs):
    """Names of the inputs (name -> array) whose bytes differ from the input file they were
    read from, compared a chunk at a time: cheaper than hashing them, and no second copy of
    the inputs held while the candidate runs."""
    changed = []
    scratch = np.empty(_COMPARE_CHUNK, dtype=np.uint8)
    with open(path, "rb") as f:
        header, data = _layout(f)
        for name, buf in bufs.items():
            f.seek(data + _span(path, header, f"in.{name}", buf))
            now = buf.reshape(-1).view(np.uint8)
            for at in range(0, now.size, _COMPARE_CHUNK):
                k = min(_COMPARE_CHUNK, now.size - at)
                if f.readinto(memoryview(scratch[:k])) != k or not np.array_equal(scratch[:k], now[at : at + k]):
                    changed.append(name)
                    break
    return changed


class CKernel(Kernel):
    """A C (or CUDA host) entry point in a shared library, called through ctypes."""

    def __init__(self, req):
        super().__init__(req)
        self.lib = ctypes.CDLL(req["library"], mode=os.RTLD_LOCAL | os.RTLD_NOW)
        try:
            self.fn = getattr(self.lib, req["entry"])
        except AttributeError:
            raise HarnessError(f"entry point {req['entry']!r} not exported by the library") from None
        argtypes = []
        for inp in self.inputs:
            if inp["shape"]:
                argtypes.append(ctypes.c_void_p)
            elif inp["dtype"] in CTYPES:
                argtypes.append(CTYPES[inp["dtype"]])
            else:
                raise HarnessError(f"scalar input {inp['name']} of dtype {inp['dtype']} cannot be passed by value")
        argtypes += [ctypes.c_void_p] * len(self.outputs)
        argtypes += [ctypes.c_int64] * req["naxes"]
        self.fn.argtypes = argtypes
        self.fn.restype = None

    def invoke(self, s, axes):
        args = []
        for buf, inp in zip(s["ins"], self.inputs, strict=False):
            if inp["shape"]:
                args.append(buf.ctypes.data)
            else:
                v = buf.reshape(())
                args.append(v.view(np.uint16).item() if inp["dtype"] == "bfloat16" else v.item())
        args += [buf.ctypes.data for buf in s["outs"]]
        args += axes
        t0 = time.perf_counter_ns()
        self.fn(*args)
        return time.perf_counter_ns() - t0


GO, DONE = 3, 4  # the timing channel: the judge writes on GO, the runner answers on DONE
WARM_NS = 50_000


def _warmer():
    """The allocation guard's `ksmith_warm` (preloaded), or a no-op without it."""
    try:
        fn = ctypes.CDLL(None).ksmith_warm
    except (AttributeError, OSError):
        return lambda _ns: None
    fn.argtypes = [ctypes.c_long]
    fn.restype = None
    return fn


def _recv(n):
    """Reads `n` bytes from the judge, sleeping until they come. No spinning: the judge stops
    this process right after each call, and a spin after "f" only kept a core from the judge
    (its wake-up came 2-3 ms late on half the calls of a 2-core VM); the CPUs are woken before
    each call instead (`warm`)."""
    data = b""
    while len(data) < n:
        try:
            chunk = os.read(GO, n - len(data))
        except BlockingIOError:
            select.select([GO], [], [])
            continue
        if not chunk:
            raise HarnessError("the judge closed the timing channel")
        data += chunk
    return data


def _backend(req):
    name, gpu = req.get("backend", "c"), req.get("device_gpu", False)
    if name == "c":
        return CKernel
    if gpu and name in ("triton", "cuda"):
        from . import gpukernels  # torch device buffers and CUDA events, GPU machines only

        return {"triton": gpukernels.TritonGpuKernel, "cuda": gpukernels.CudaKernel}[name]
    from . import pykernels  # imports triton or jax only when a Python candidate is judged

    return {"triton": pykernels.TritonKernel, "pallas": pykernels.PallasKernel}[name]


KERNEL = {}


def _kernel():
    if "k" not in KERNEL:
        raise HarnessError("no library loaded")
    return KERNEL["k"]


def load(req):
    k = _backend(req)(req)
    KERNEL["k"] = k
    return {"interpreted": k.interpreted}


def run(req):
    """One correctness call: fills slot 0 with the given inputs, calls once, dumps outputs.
    Host work outside the kernels, found before the call or during it, is the reply instead
    (`host_compute`), whatever the call did."""
    k = _kernel()
    s = k.slot(0, req, req["inputs_path"])
    found = k.inspect(s, req["axes"])
    if found:
        return {"host_compute": found}
    kernels = None
    try:
        if req.get("profile") and hasattr(k, "profiled_call"):
            elapsed, kernels = k.profiled_call(s, req["axes"])
        else:
            elapsed = k.call(s, req["axes"])
    except Exception:
        if not k.host_found():
            raise
    if k.host_found():
        return {"host_compute": k.host_found()}
    paths, changed = k.dump(s, req["out_prefix"])
    return {"elapsed_ns": elapsed, "outputs": paths, "inputs_changed": changed, "device_kernels": kernels}


def _mapping(k, path, nbytes):
    """The judge's file `path`, mapped (every page now, MAP_POPULATE, not during a timed call)
    at least `nbytes` long: mapped again when a slot handed down from a smaller workload grew."""
    m = k.maps.get(path)
    if m is None or len(m) < nbytes:
        with open(path, "r+b") as f:
            m = mmap.mmap(f.fileno(), max(nbytes, 1), flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        k.maps[path] = m
    return m


def _view(k, path, tensor, shape):
    """Tensor `tensor` of `shape` over the start of the judge's file `path`, mapped shared."""
    dtype = np.dtype(tensors.np_dtype(tensor["dtype"]))
    n = math.prod(shape)
    return np.frombuffer(_mapping(k, path, n * dtype.itemsize), dtype=dtype, count=n).reshape(shape)


def _shared_slot(k, spec, req):
    """A timing slot: input and output buffers mapped from files the judge created and also
    maps, so the judge writes fresh inputs and poison and reads outputs itself. The judge hands
    a slot from one workload to the next: the same files, other shapes."""
    key = (tuple(spec["ins"]), tuple(spec["outs"]), repr(req["in_shapes"]), repr(req["out_shapes"]))
    s = k.shared.get(key)
    if s is None:
        s = {
            "key": key,
            "shape_key": None,
            "ins": [_view(k, p, i, sh) for p, i, sh in zip(spec["ins"], k.inputs, req["in_shapes"], strict=True)],
            "outs": [_view(k, p, o, sh) for p, o, sh in zip(spec["outs"], k.outputs, req["out_shapes"], strict=True)],
        }
        k.shared[key] = s
    return s


def timed(req):
    """Timed calls driven by the judge over the timing channel. Per call: "p" + slot (the judge
    has written fresh inputs and poison into the slot while this process was stopped; backends
    with a device copy them over), answered "r" once the threads are awake; then the call, "d"
    (the device is done), and "f" once the outputs are back in the slot. The judge's clock runs
    from "p" to "f", the wake-up up to "r" charged beyond what an empty call needs. Between
    calls the judge stops every process of the sandbox."""
    k = _kernel()
    warm = _warmer()
    slots = [_shared_slot(k, spec, req) for spec in req["slots"]]
    inproc = []
    for _ in range(req["calls"]):
        cmd = _recv(2)
        if cmd[:1] != b"p" or cmd[1] >= len(slots):
            raise HarnessError("unexpected bytes on the timing channel")
        s = slots[cmd[1]]
        k.refresh(s)
        warm(WARM_NS)
        os.write(DONE, b"r")
        inproc.append(k.invoke(s, req["axes"]))
        os.write(DONE, b"d")
        k.collect(s)
        os.write(DONE, b"f")
    # The runner's own figures: information for diagnosis, never used as a result.
    return {"inproc_ns": inproc}


def calibrate(req):
    """Before any candidate is loaded: the timing protocol around empty calls, so the judge
    learns what the channel itself costs."""
    warm = _warmer()
    for _ in range(req["calls"]):
        _recv(2)
        warm(WARM_NS)
        os.write(DONE, b"r")
        os.write(DONE, b"d")
        os.write(DONE, b"f")
    return {}


def hello(_req):
    return {"protocol": PROTOCOL, "pid": os.getpid()}


def main():
    proto_in = os.fdopen(os.dup(0), "r")
    proto_out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # whatever the kernel prints lands in the capped log, never on the protocol pipe
    # Past RLIMIT_FSIZE writes fail with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.set_blocking(GO, False)
    serve({"hello": hello, "calibrate": calibrate, "load": load, "run": run, "time": timed}, proto_in, proto_out)


if __name__ == "__main__":
    main()
