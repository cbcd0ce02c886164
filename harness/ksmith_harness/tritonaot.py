"""Triton ahead of time: a candidate's kernels compiled for a named NVIDIA GPU with no device.

Run by the judge's build step inside the build sandbox, never in a trusted process: it imports
the candidate and calls its entry point once, on stand-in tensors of the judged workload's
shapes (zeros; no kernel runs). A stand-in driver names the target, so every launch goes
through Triton's own argument binding and specialization and is compiled (as `warmup` does)
instead of launched; autotuned kernels are compiled for each of their configs.

What comes out is what a compiler says: per kernel its ptxas report (registers, spills) and
shared memory, or compile errors placed in the candidate's source. The judge reads it as it
reads a compiler's output, facts and diagnostics, never as a verdict on correctness.

    python -m ksmith_harness.tritonaot REQUEST.json RESULT.json
"""

import contextlib
import io
import json
import os
import sys
import traceback

import numpy as np

from .protocol import HarnessError

# Autotuned kernels: at most this many configs compiled (each is a full compile).
MAX_CONFIGS = 16
# Longest message kept per diagnostic.
MAX_MESSAGE = 2000

_NUMPY = {"bfloat16": np.uint16, "bool": np.uint8}


class KernelFailed(Exception):
    """A kernel did not compile (raised from the launch, so the host code stops there)."""


def _stand_ins(req, tensor_class):
    """The entry's arguments: stand-in tensors (zeros) for inputs and outputs, scalars, axes."""
    args = []
    for spec in req["inputs"]:
        if spec["shape"]:
            arr = np.zeros(spec["shape"], dtype=_NUMPY.get(spec["dtype"], spec["dtype"]))
            args.append(tensor_class(arr, spec["dtype"], spec["name"]))
        else:
            # A scalar: neither 1 nor a multiple of 16, which Triton would specialize on.
            args.append(0.5 if spec["dtype"].startswith(("float", "bfloat")) else 3)
    for spec in req["outputs"]:
        arr = np.zeros(spec["shape"], dtype=_NUMPY.get(spec["dtype"], spec["dtype"]))
        args.append(tensor_class(arr, spec["dtype"], spec["name"]))
    args.extend(int(a) for a in req["axes"])
    return args


def _place_in_kernel(err, source_lines):
    """(line, column) in the module of a Triton front-end error, else None.

    Triton numbers lines from the kernel's `def` (its source is parsed alone); the `def` line
    is found in the module by its text."""
    node = getattr(err, "node", None)
    src = getattr(err, "src", None)
    if node is None or not isinstance(src, str) or not src.strip():
        return None
    first = src.strip().splitlines()[0].strip()
    for i, line in enumerate(source_lines):
        if line.strip() == first:
            indent = len(line) - len(line.lstrip())
            return i + getattr(node, "lineno", 1), indent + getattr(node, "col_offset", 0) + 1
    return None


def _place_in_candidate(err, module_path):
    """(line, 0) of the deepest frame in the candidate's file (the launch), else (0, 0)."""
    line = 0
    for frame in traceback.extract_tb(err.__traceback__):
        if os.path.abspath(frame.filename) == module_path:
            line = frame.lineno or 0
    return line, 0


def _message(err):
    text = getattr(err, "error_message", None) or str(err) or type(err).__name__
    text = str(text).strip()
    if not getattr(err, "error_message", None):
        text = f"{type(err).__name__}: {text}"
    return text[:MAX_MESSAGE]


def run(req):
    """Compiles every kernel the entry launches; returns the result as a JSON-ready dict."""
    # The interpreter would run the kernels on the host instead of compiling them (Triton reads
    # this when a kernel is decorated, so before the candidate is imported).
    os.environ.pop("TRITON_INTERPRET", None)
    # Triton 3.9 warns when it is unset; 1 is its default (fused multiply-add allowed).
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    module_path = os.path.abspath(req["module"])
    module_name = os.path.basename(module_path)
    result = {"status": "compiled", "kernels": [], "ptxas_log": "", "diagnostics": [], "note": ""}
    try:
        import triton
        from triton import knobs
        from triton.backends.compiler import GPUTarget
        from triton.backends.driver import DriverBase
        from triton.runtime import driver
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
    except ImportError as e:
        return {**result, "status": "host_error", "note": f"this Triton cannot compile ahead of time: {e}"}
    result["triton"] = triton.__version__

    class StandInDriver(DriverBase):
        """Names the target; nothing that needs a device is ever asked of it."""

        @classmethod
        def is_active(cls):
            return False

        def __init__(self, target):
            self.target = target

        def map_python_to_cpp_type(self, ty):
            raise HarnessError("no device: nothing is launched ahead of time")

        def get_current_target(self):
            return self.target

        def get_active_torch_device(self):
            raise HarnessError("no device: nothing is launched ahead of time")

        def get_benchmarker(self):
            raise HarnessError("no device: nothing is timed ahead of time")

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

    driver.set_active(StandInDriver(GPUTarget("cuda", int(req["capability"]), 32)))
    knobs.nvidia.dump_ptxas_log = True
    source_lines = open(module_path, encoding="utf-8", errors="replace").read().splitlines()
    compiled = []
    failures = []
    configs_skipped = [0]
    launch = JITFunction.run

    def compile_instead(self, *args, grid, warmup, **kwargs):
        try:
            kernel = launch(self, *args, grid=grid, warmup=True, **kwargs)
        except Exception as e:
            place = _place_in_kernel(e, source_lines) or _place_in_candidate(e, module_path)
            failures.append({"file": module_name, "line": place[0], "column": place[1], "severity": "error", "message": _message(e)})
            raise KernelFailed(getattr(self, "__name__", "kernel")) from e
        if kernel is not None and all(k is not kernel for _, k in compiled):
            compiled.append((self, kernel))
        return kernel

    def every_config(self, *args, **kwargs):
        for config in self.configs[:MAX_CONFIGS]:
            self.fn.run(*args, **{**kwargs, **config.all_kwargs()})
        configs_skipped[0] += max(0, len(self.configs) - MAX_CONFIGS)

    JITFunction.run = compile_instead
    Autotuner.run = every_config
    captured = io.StringIO()
    try:
        from .pykernels import NumpyTensor, _import_candidate

        with contextlib.redirect_stdout(captured):
            entry = _import_candidate({"module": module_path, "entry": req["entry"]})
            entry(*_stand_ins(req, NumpyTensor))
    except KernelFailed:
        pass
    except HarnessError as e:
        result.update(status="host_error", note=str(e)[:MAX_MESSAGE])
    except Exception as e:
        line, _ = _place_in_candidate(e, module_path)
        result.update(status="host_error", note=f"{module_name}:{line}: the host code raised {_message(e)}")
    result["ptxas_log"] = "\n".join(line for line in captured.getvalue().splitlines() if line.startswith("ptxas") or "bytes stack frame" in line)
    if failures:
        result.update(status="compile_error", diagnostics=failures)
    elif not compiled and result["status"] == "compiled":
        result.update(status="no_launch", note="the entry point launched no Triton kernel")
    for fn, kernel in compiled:
        md = kernel.metadata
        result["kernels"].append(
            {
                "name": getattr(md, "name", fn.__name__),
                "function": fn.__name__,
                "num_warps": getattr(md, "num_warps", 0),
                "num_stages": getattr(md, "num_stages", 0),
                "shared": getattr(md, "shared", 0),
                "signature": {k: str(v) for k, v in getattr(kernel.src, "signature", {}).items()},
            }
        )
    if configs_skipped[0]:
        result["note"] = f"{configs_skipped[0]} autotune configs beyond the first {MAX_CONFIGS} were not compiled"
    return result


def main(argv):
    # "-": the request is the one line on stdin (the judge runs this in an in-memory directory
    # it cannot stage files into before the process starts).
    if argv[1] == "-":
        req = json.loads(sys.stdin.readline())
    else:
        with open(argv[1], encoding="utf-8") as f:
            req = json.load(f)
    result = run(req)
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
