#!/usr/bin/env bash
# Per-candidate judge cost, two ksmith binaries side by side (e.g. before and after a change to
# the judge), alternating evaluation by evaluation so machine drift hits both:
#   bash benches/judge_overhead.sh OLD_KSMITH NEW_KSMITH [REPEATS]
# Prints, per binary and solution, the median wall time and its split (build, kernel, baseline,
# harness) from `eval --json`, and the speedup the judge reported.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?old ksmith binary}
NEW=${2:?new ksmith binary}
REPS=${3:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
CASES="softmax:tasks/starter/softmax/solutions/fast matmul:tasks/starter/matmul/solutions/fast vector_add:tasks/starter/vector_add/solutions/fast rmsnorm:tasks/starter/rmsnorm/solutions/fast"
for bin in "$OLD" "$NEW"; do
    tag=$(basename "$(dirname "$(dirname "$(dirname "$bin")")")")
    mkdir -p "$WORK/$tag"
    # Warm: references, builds, roofline.
    for c in $CASES; do
        "$bin" --store "$WORK/$tag/store" eval "tasks/starter/${c%%:*}" "${c#*:}" --json > /dev/null 2>&1 || true
    done
done
for r in $(seq "$REPS"); do
    for c in $CASES; do
        for bin in "$OLD" "$NEW"; do
            tag=$(basename "$(dirname "$(dirname "$(dirname "$bin")")")")
            start=$(date +%s.%N)
            "$bin" --store "$WORK/$tag/store" eval "tasks/starter/${c%%:*}" "${c#*:}" --json 2> /dev/null > "$WORK/out.json" || true
            wall=$(echo "$(date +%s.%N) - $start" | bc)
            python3 - "$tag" "${c%%:*}" "$wall" "$WORK/out.json" >> "$WORK/rows.txt" <<'PY'
import json, sys
tag, case, wall, path = sys.argv[1:]
v = json.load(open(path))
t = v.get("time_split", {})
sp = (v.get("performance") or {}).get("speedup", 0)
print(tag, case, wall, t.get("build_s", 0), t.get("kernel_s", 0), t.get("baseline_s", 0), t.get("harness_s", 0), sp, v["status"])
PY
        done
    done
done
python3 - "$WORK/rows.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("| binary | solution | runs | wall s (median) | kernel s | XLA baseline s | harness s | harness share | speedup (min-max) | status |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
keys = sorted({(r[0], r[1]) for r in rows}, key=lambda k: (k[1], k[0]))
for tag, case in keys:
    rs = [r for r in rows if r[0] == tag and r[1] == case]
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    sps = [float(r[7]) for r in rs]
    print(f"| {tag} | {case} | {len(rs)} | {med(2):.2f} | {med(4):.2f} | {med(5):.2f} | {med(6):.2f} | {med(6) / max(med(2), 1e-9):.0%} | {min(sps):.2f}-{max(sps):.2f}x | {','.join(sorted({r[8] for r in rs}))} |")
PY
