#!/usr/bin/env bash
# Deploy: what a kernel's judged speedup becomes inside a user's jax.jit graph.
#   bash benches/deploy.sh [KSMITH] [TASK_DIR ...]
# Judges each task's fast C solution (`ksmith eval`: fresh inputs per call, caches flushed
# where the working set fits in them, the candidate in its sandbox), exports the winners as a
# JAX package, then times every kernel through its XLA FFI binding inside jax.jit next to the
# reference compiled by XLA (`ksmith verify-export`: same inputs, warm caches, call overhead
# included). Prints one table: per task, the judged speedup and the in-graph speedup, each with
# its 95% interval. Default: the starter suite.
set -euo pipefail
cd "$(dirname "$0")/.."
KSMITH=${1:-target/release/ksmith}
shift || true
TASKS=("$@")
[ ${#TASKS[@]} -gt 0 ] || TASKS=(tasks/starter/*/)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/store"
[ -f .ksmith/hw.json ] && cp .ksmith/hw.json "$WORK/store/"
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${TASKS[@]}"; do
    t=${t%/}
    "$KSMITH" --store "$WORK/store" eval "$t" "$t/solutions/fast" --json 2> /dev/null > "$WORK/$(basename "$t").json" || true
done
"$KSMITH" --store "$WORK/store" export --format jax --out "$WORK/pkg" "${TASKS[@]}" > /dev/null
KSMITH_KERNELS_CACHE="$WORK/cache" "$KSMITH" --store "$WORK/store" verify-export "$WORK/pkg" --json --rounds 15 2> /dev/null > "$WORK/verify.json" || true
python3 - "$WORK" <<'PY'
import json, math, os, sys

work = sys.argv[1]
verify = {k["name"]: k for k in json.load(open(os.path.join(work, "verify.json")))["kernels"]}
print("| task | judged speedup (95%) | in jax.jit via FFI (95%) | per workload: judged / in jit |")
print("| --- | --- | --- | --- |")
for name in sorted(verify):
    e = json.load(open(os.path.join(work, f"{name}.json")))
    p = e.get("performance") or {}
    k = verify[name]
    judged = f"{p['speedup']:.2f}x ({p['speedup_interval'][0]:.2f}-{p['speedup_interval'][1]:.2f})" if p else e.get("status")
    ws = k.get("workloads", [])
    if "speedup" in k:
        lo = math.exp(sum(math.log(w["speedup_interval"][0]) for w in ws) / len(ws))
        hi = math.exp(sum(math.log(w["speedup_interval"][1]) for w in ws) / len(ws))
        jit = f"{k['speedup']:.2f}x ({lo:.2f}-{hi:.2f})"
    else:
        jit = k.get("status", "?") + " " + k.get("detail", "")
    per = ", ".join(
        f"{pw['speedup']:.2f} / {jw.get('speedup', float('nan')):.2f}"
        for pw, jw in zip(p.get("workloads", []), ws)
    )
    print(f"| {name} | {judged} | {jit} | {per} |")
PY
