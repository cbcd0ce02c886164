"""The two sides of ``ksmith verify-export``, split the way the judge splits a candidate's checks.

The checker (``KSMITH_EXPORT_ROLE=checker``, a trusted process that never builds or loads a
kernel) draws each workload's inputs for a fresh seed, computes the task's reference in float64
and checks the outputs the runner wrote. The runner (``KSMITH_EXPORT_ROLE=runner``, started in
the judge's sandbox: no privileges, no network, no host /proc, a private directory, only the
system, the Python environment and the export readable) builds one kernel the way the package
builds it for a user, calls it through its JAX binding inside ``jax.jit`` on the same inputs
(drawn again from the seed), writes the raw outputs in its private directory, and times it next
to the reference. Nothing the runner says is taken as a check result; its timings are its own
clock's (shown, never a verdict).

Both import the export's own ``verify`` module for the drawing, the reference and the timing,
so the figures are those ``python -m PACKAGE.verify`` computes.
"""

import importlib
import os
import signal
import stat
import sys

import numpy as np

from . import PROTOCOL
from .protocol import HarnessError, main_loop

_packages = {}
_jitted = {}


def _package(req):
    """(package module, its verify module) of the export at req["dir"], imported once."""
    key = (req["dir"], req["package"])
    if key not in _packages:
        sys.path.insert(0, req["dir"])
        try:
            pkg = importlib.import_module(req["package"])
            verify = importlib.import_module(f"{req['package']}.verify")
        except ImportError as e:
            raise HarnessError(f"cannot import the export: {e}") from e
        finally:
            sys.path.remove(req["dir"])
        _packages[key] = (pkg, verify)
    return _packages[key]


def _kernel(req):
    pkg, verify = _package(req)
    try:
        return pkg.kernels[req["kernel"]], verify
    except KeyError:
        raise HarnessError(f"the export has no kernel {req['kernel']!r}") from None


def _inputs(req):
    k, verify = _kernel(req)
    return k, verify, verify._inputs(k, k.spec["workloads"][req["workload"]], req["seed"])


# -- the checker (trusted) -----------------------------------------------------------------
def open_export(req):
    """What the export holds: per kernel its binding, provenance and workloads."""
    import jax

    pkg, _ = _package(req)
    kernels = {
        n: {
            "binding": k.binding,
            "language": k.spec["language"],
            "evaluation": k.spec["provenance"]["evaluation"],
            "judged_speedup": k.spec["provenance"]["speedup"],
            "workloads": [w["axes"] for w in k.spec["workloads"]],
        }
        for n, k in pkg.kernels.items()
    }
    return {"backend": jax.default_backend(), "kernels": kernels}


def _read_output(path, dtype, count):
    """A raw output the runner wrote: a regular file, never through a link and never blocking
    on a FIFO (the directory is the kernel's), at most one element more than expected."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError("is not a regular file")
        data = f.read((count + 1) * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise ValueError(f"holds {len(data)} bytes, not {count} {dtype.name} elements")
    return np.frombuffer(data, dtype=dtype)


def check(req):
    """Checks the runner's outputs for (kernel, workload, seed) against the float64 reference."""
    k, verify, arrays = _inputs(req)
    refs = verify._reference64(k, arrays)
    outs = []
    for spec, ref in zip(k.outputs, refs, strict=True):
        dtype = np.dtype(verify.dtype_of(spec["dtype"]))
        shape = tuple(np.shape(ref))
        try:
            outs.append(_read_output(req["outputs"][spec["name"]], dtype, int(np.prod(shape, dtype=np.int64))).reshape(shape))
        except (OSError, ValueError, KeyError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            return {"correct": False, "output": spec["name"], "detail": f"output {spec['name']}: {why}"}
    ok, worst = verify._check(k, outs, refs)
    return {"correct": bool(ok), **worst}


# -- the runner (sandboxed) ----------------------------------------------------------------
def load(req):
    """Builds and loads the kernel as the package does for a user; says whether it is ready."""
    k, _ = _kernel(req)
    return {"status": k.status()}


def run(req):
    """One call of the kernel inside jax.jit on the seed's inputs; raw outputs to files."""
    import jax

    k, _, arrays = _inputs(req)
    fn = _jitted.setdefault(k.name, jax.jit(k.unchecked))
    outs = fn(*arrays)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    written = {}
    for spec, out in zip(k.outputs, outs, strict=True):
        path = f"{req['prefix']}.{spec['name']}.bin"
        np.ascontiguousarray(np.asarray(out)).tofile(path)
        written[spec["name"]] = os.path.basename(path)
    return {"outputs": written}


def timed(req):
    """The kernel and the reference timed inside jax.jit, alternating rounds (this process's clock)."""
    k, verify, arrays = _inputs(req)
    return verify._time(k, arrays, req["rounds"], req["min_round_ms"])


def hello(_req):
    return {"protocol": PROTOCOL, "pid": os.getpid(), "role": os.environ.get("KSMITH_EXPORT_ROLE")}


def main():
    role = os.environ.get("KSMITH_EXPORT_ROLE")
    if role == "runner":
        # Past RLIMIT_FSIZE writes fail with EFBIG instead of killing the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        main_loop({"hello": hello, "load": load, "run": run, "time": timed})
    elif role == "checker":
        main_loop({"hello": hello, "open": open_export, "check": check})
    else:
        sys.exit(f"KSMITH_EXPORT_ROLE must be runner or checker, not {role!r}")


if __name__ == "__main__":
    main()
