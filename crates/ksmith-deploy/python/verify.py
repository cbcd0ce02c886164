"""``python -m PACKAGE.verify``: re-checks every exported kernel through its JAX binding (the
FFI path for C and CUDA) against the task's reference on fresh seeds, and times it inside
``jax.jit`` next to the reference compiled by XLA, so the speedup a user gets in their graph
(call overhead included) is measured, not assumed.

Correctness follows the judge: inputs drawn from each workload's distributions with a fresh
random seed, the reference computed in float64, every output element within
``atol + rtol * |reference|``. Timing alternates rounds of kernel and reference calls on the
same inputs (warm caches, as inside a model); the speedup is the median of per-round ratios
with a distribution-free 95% interval.

Run this way, every kernel runs natively in this Python process, with your rights: the code is
machine-written and was judged in a sandbox, and a native kernel can behave differently outside
one. ``ksmith verify-export DIR`` does the same checks with each kernel built and called inside
the judge's sandbox, and the checks made by a process that never loads a kernel.
"""

import argparse
import importlib
import json
import math
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from ._runtime import _load_module, dtype_of


def _draw(rng, dist, shape, dtype_name, axes, generator):
    kind = dist["dist"]
    if kind == "normal":
        a = rng.normal(dist["mean"], dist["std"], size=shape)
    elif kind == "uniform":
        a = rng.uniform(dist["low"], dist["high"], size=shape)
    elif kind == "integers":
        a = rng.integers(dist["low"], dist["high"], size=shape)
    elif kind == "constant":
        a = np.full(shape, dist["value"])
    elif kind == "generator":
        a = np.asarray(generator(dist["function"])(rng, tuple(shape), np.dtype(dtype_of(dtype_name)), dict(axes)))
    else:
        raise ValueError(f"unknown distribution {kind!r}")
    return np.asarray(np.asarray(a).astype(dtype_of(dtype_name)), order="C")  # (ascontiguousarray makes 0-d arrays 1-d)


def _inputs(kernel, workload, seed):
    rng = np.random.default_rng(seed)
    module = {}

    def generator(name):
        if "m" not in module:
            ref = kernel.spec["reference"]
            module["m"] = _load_module(os.path.join(kernel.dir, "ref", ref["file"]), f"_ksmith_gen_{kernel.name}")
        return getattr(module["m"], name)

    dists = dict(workload["inputs"])
    axes = workload["axes"]
    return [_draw(rng, dists[s["name"]], [axes[a] for a in s["shape"]], s["dtype"], axes, generator) for s in kernel.inputs]


def _reference64(kernel, arrays):
    """The task's reference on these inputs, floating-point inputs widened to float64."""
    wide = [a.astype(np.float64) if s["dtype"] in ("float32", "float16", "bfloat16") else a for a, s in zip(arrays, kernel.inputs, strict=True)]
    with jax.enable_x64(True):
        refs = kernel.reference(*[jnp.asarray(a) for a in wide])
        return [np.asarray(r) for r in (refs if isinstance(refs, (tuple, list)) else [refs])]


def _check(kernel, outputs, refs):
    worst = {"max_abs_error": 0.0, "fraction_bad": 0.0, "output": None}
    ok = True
    for spec, out, ref in zip(kernel.outputs, outputs, refs, strict=True):
        out = np.asarray(out)
        if out.shape != tuple(np.shape(ref)):
            return False, {"output": spec["name"], "detail": f"shape {out.shape}, expected {np.shape(ref)}"}
        if spec["dtype"] in ("float32", "float64", "float16", "bfloat16"):
            c = out.astype(np.float64)
            r = np.asarray(ref, dtype=np.float64)
            err = np.abs(c - r)
            bad = ~(err <= spec["atol"] + spec["rtol"] * np.abs(r))
            bad &= ~(np.isnan(c) & np.isnan(r))
            finite = err[np.isfinite(err)]
            max_abs = float(finite.max()) if finite.size else 0.0
        else:
            bad = out != np.asarray(ref).astype(out.dtype)
            max_abs = float(np.abs(out.astype(np.float64) - np.asarray(ref, dtype=np.float64)).max()) if out.size else 0.0
        frac = float(bad.mean()) if bad.size else 0.0
        if frac > 0:
            ok = False
        if frac >= worst["fraction_bad"]:
            worst = {"max_abs_error": max(max_abs, worst["max_abs_error"]), "fraction_bad": frac, "output": spec["name"]}
    return ok, worst


def _time_calls(fn, args, n):
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def _interval(ratios):
    r = sorted(ratios)
    n = len(r)
    if n < 6:
        return r[0], r[-1]
    k = max(0, math.floor((n - 1.96 * math.sqrt(n)) / 2))
    return r[k], r[n - 1 - k]


def _time(kernel, args, rounds, min_round_ms):
    fk = jax.jit(kernel.unchecked)
    fr = jax.jit(kernel.reference)
    for _ in range(3):
        jax.block_until_ready(fk(*args))
        jax.block_until_ready(fr(*args))
    one = max(_time_calls(fk, args, 3), _time_calls(fr, args, 3), 1e-3)
    n = max(3, min(200, math.ceil(min_round_ms / one)))
    ratios, k_ms, r_ms = [], [], []
    for i in range(rounds):
        if i % 2 == 0:
            k, r = _time_calls(fk, args, n), _time_calls(fr, args, n)
        else:
            r, k = _time_calls(fr, args, n), _time_calls(fk, args, n)
        k_ms.append(k)
        r_ms.append(r)
        ratios.append(r / k)
    lo, hi = _interval(ratios)
    return {
        "kernel_ms": statistics.median(k_ms),
        "reference_ms": statistics.median(r_ms),
        "speedup": statistics.median(ratios),
        "speedup_interval": [lo, hi],
        "rounds": rounds,
        "calls_per_round": n,
    }


def verify_kernel(kernel, seeds, rounds, min_round_ms, timing=True):
    """Checks and times one kernel on every validated workload; returns a JSON-able dict."""
    result = {
        "name": kernel.name,
        "binding": kernel.binding,
        "evaluation": kernel.spec["provenance"]["evaluation"],
        "judged_speedup": kernel.spec["provenance"]["speedup"],
        "workloads": [],
    }
    status = kernel.status()
    if status != "ready":
        result.update(status="unavailable", detail=status)
        return result
    checked = jax.jit(kernel.unchecked)
    all_ok = True
    for wi, w in enumerate(kernel.spec["workloads"]):
        row = {"workload": wi, "axes": w["axes"], "checks": 0}
        try:
            for _ in range(seeds):
                seed = int.from_bytes(os.urandom(8), "little") >> 1
                arrays = _inputs(kernel, w, seed)
                outs = checked(*arrays)
                outs = list(outs) if isinstance(outs, tuple) else [outs]
                ok, worst = _check(kernel, outs, _reference64(kernel, arrays))
                row["checks"] += 1
                if not ok:
                    row.update(correct=False, seed=seed, **worst)
                    break
            else:
                row["correct"] = True
            if row["correct"] and timing:
                row.update(_time(kernel, arrays, rounds, min_round_ms))
        except Exception as e:  # the kernel or the reference failed: reported, the others still run
            row.update(correct=False, detail=f"{type(e).__name__}: {e}")
        all_ok &= row["correct"]
        result["workloads"].append(row)
    speedups = [r["speedup"] for r in result["workloads"] if "speedup" in r]
    if speedups and len(speedups) == len(result["workloads"]):
        result["speedup"] = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    result["status"] = "ok" if all_ok else "incorrect"
    return result


def main(argv=None):
    package_name = __spec__.parent if __spec__ else __package__
    parser = argparse.ArgumentParser(prog=f"python -m {package_name}.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", help="only this kernel (repeatable)")
    parser.add_argument("--seeds", type=int, default=2, help="fresh seeds per workload (default 2)")
    parser.add_argument("--rounds", type=int, default=12, help="timing rounds per workload (default 12, at least 6)")
    parser.add_argument("--min-round-ms", type=float, default=20.0, help="minimum time per round and side (default 20)")
    parser.add_argument("--no-timing", action="store_true", help="check only")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    if args.seeds < 1 or (args.rounds < 6 and not args.no_timing) or not args.min_round_ms > 0:
        parser.error("--seeds must be at least 1, --rounds at least 6 (fewer rounds give no interval), --min-round-ms positive")
    try:
        pkg = importlib.import_module(package_name)
    except ImportError as e:  # a damaged export: one line, for ksmith verify-export to show
        print(json.dumps({"error": str(e)}) if args.json else f"error: {e}", file=sys.stdout if args.json else sys.stderr)
        return 2
    names = args.kernel or sorted(pkg.kernels)
    unknown = [n for n in names if n not in pkg.kernels]
    if unknown:
        parser.error(f"no kernel {', '.join(unknown)} (have: {', '.join(sorted(pkg.kernels))})")
    results = []
    for n in names:
        r = verify_kernel(pkg.kernels[n], args.seeds, args.rounds, args.min_round_ms, timing=not args.no_timing)
        results.append(r)
        if not args.json:
            line = f"{n:24} {r['status']:12}"
            if "speedup" in r:
                judged = "untimed" if r["judged_speedup"] is None else f"{r['judged_speedup']:.2f}x"
                line += f" {r['speedup']:.2f}x in jax.jit (judged {judged})"
            print(line + (f"  {r['detail']}" if "detail" in r else ""), flush=True)
    if args.json:
        print(json.dumps({"package": package_name, "backend": jax.default_backend(), "kernels": results}))
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
