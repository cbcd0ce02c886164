"""Loads a `ksmith export --format flashinfer-trace` directory with flashinfer-bench's own classes.

Usage: python load_export.py EXPORT_DIR

Every definition, solution and trace file is validated with `Definition`, `Solution` and `Trace`
(pydantic, strict to their schema), then the whole directory with `TraceSet.from_path`. Prints
one JSON document: what loaded, as their classes read it back (so only what pydantic kept).
Exits non-zero with the first validation error otherwise.

flashinfer-bench is installed without its GPU dependencies (torch, flashinfer, tvm-ffi): the
package's top-level `__init__` imports its benchmark and GPU modules, so it is bypassed and only
`flashinfer_bench.data` is imported. Its `trace_set` module imports torch and safetensors for
blob tensors at module level; where torch is absent they are stand-ins that fail if anything
touches them, which loading JSON does not.
"""

import importlib.util
import json
import sys
import types
from pathlib import Path


class _Absent(types.ModuleType):
    """A module that is not installed: any use of it fails loudly."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"{self.__name__}.{name} used while loading an export; {self.__name__} is not installed here")


def _import_data():
    spec = importlib.util.find_spec("flashinfer_bench")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("flashinfer_bench is not installed in this interpreter")
    pkg = types.ModuleType("flashinfer_bench")
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__spec__ = spec
    sys.modules["flashinfer_bench"] = pkg
    if importlib.util.find_spec("torch") is None:
        for name in ("torch", "safetensors", "safetensors.torch"):
            sys.modules[name] = _Absent(name)
    from flashinfer_bench import data

    return data


def main():
    root = Path(sys.argv[1])
    data = _import_data()
    out = {"definitions": {}, "solutions": {}, "traces": [], "workloads": []}
    for p in sorted((root / "definitions").rglob("*.json")):
        d = data.Definition.model_validate_json(p.read_text())
        out["definitions"][d.name] = {
            "op_type": d.op_type,
            "inputs": {k: {"shape": v.shape, "dtype": v.dtype.value} for k, v in d.inputs.items()},
            "outputs": {k: {"shape": v.shape, "dtype": v.dtype.value, "description": v.description} for k, v in d.outputs.items()},
            "tags": d.tags,
        }
    for p in sorted((root / "solutions").rglob("*.json")):
        s = data.Solution.model_validate_json(p.read_text())
        out["solutions"][s.name] = {
            "definition": s.definition,
            "language": s.spec.language.value,
            "entry_point": s.spec.entry_point,
            "entry_source": s.get_entry_source() is not None,
            "destination_passing_style": s.spec.destination_passing_style,
            "description": s.description,
        }
    for p in sorted((root / "traces").rglob("*.jsonl")):
        for line in p.read_text().splitlines():
            if not line.strip():
                continue
            t = data.Trace.model_validate_json(line)
            e = t.evaluation
            out["traces"].append(
                {
                    "definition": t.definition,
                    "solution": t.solution,
                    "uuid": t.workload.uuid,
                    "axes": t.workload.axes,
                    "inputs": {k: v.model_dump(mode="json") for k, v in t.workload.inputs.items()},
                    "status": e.status.value,
                    "hardware": e.environment.hardware,
                    "libs": e.environment.libs,
                    "correctness": e.correctness.model_dump(mode="json") if e.correctness else None,
                    "performance": e.performance.model_dump(mode="json") if e.performance else None,
                    "log": e.log,
                }
            )
    for p in sorted((root / "workloads").rglob("*.jsonl")):
        for line in p.read_text().splitlines():
            if line.strip():
                t = data.Trace.model_validate_json(line)
                assert t.is_workload_trace(), line
                out["workloads"].append({"definition": t.definition, "uuid": t.workload.uuid, "axes": t.workload.axes})
    ts = data.TraceSet.from_path(str(root))
    out["trace_set"] = {
        "definitions": sorted(ts.definitions),
        "solutions": sum(len(v) for v in ts.solutions.values()),
        "traces": sum(len(v) for v in ts.traces.values()),
        "workloads": sum(len(v) for v in ts.workloads.values()),
        "resolved": all(ts.get_solution(t.solution) is not None for v in ts.traces.values() for t in v),
        "summary": ts.summary(),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
