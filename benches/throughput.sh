#!/usr/bin/env bash
# Judge throughput: what one candidate costs beyond its kernel's and the baseline's own timed
# time, for the starter suite's fast solutions and ten KSBench seeds, two ksmith binaries
# alternating case by case (so machine drift hits both):
#   bash benches/throughput.sh OLD_KSMITH NEW_KSMITH [REPEATS]
# LLC_MIB=300 makes both binaries believe the last-level cache is that large (the VMs that
# report a 300 MiB L3 of which they own a small share), by editing each store's roofline.
# Prints per binary and case the median wall time, kernel + baseline time, harness time and its
# share, the speedup with its interval where the binary reports one, and (for binaries that
# report it) where the harness time went. Every case is evaluated once first (references, builds
# and compiled programs cached: what every candidate after a task's first finds); the raw rows
# are kept in benches/results/throughput-rows.jsonl (ROWS_OUT). FRESH_BUILDS=1 removes each
# store's build cache before every measured evaluation, so each compiles its candidate as a
# new one (a search's or tuner's) does.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?old ksmith binary}
NEW=${2:?new ksmith binary}
REPS=${3:-1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
CASES=""
for t in tasks/starter/*/; do
    t=${t%/}
    [ -d "$t/solutions/fast" ] && CASES="$CASES $t:$t/solutions/fast"
done
for t in gemm gemm_add_relu matmul_sigmoid_sum cross_entropy rmsnorm_llm swiglu_mlp \
    conv2d_relu_biasadd matmul_gelu_softmax gqa_attention retnet_retention; do
    CASES="$CASES tasks/ksbench/$t:tasks/ksbench/$t/solutions/seed"
done
tag_of() { if [ "$1" = "$OLD" ]; then echo old; else echo new; fi; }
run() { # binary case -> one row
    local bin=$1 c=$2 tag start wall
    tag=$(tag_of "$bin")
    if [ -n "${FRESH_BUILDS:-}" ]; then rm -rf "$WORK/$tag/cache/build"; fi
    start=$(date +%s.%N)
    "$bin" --store "$WORK/$tag" eval "${c%%:*}" "${c#*:}" --json --again 2> /dev/null > "$WORK/out.json" || true
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    python3 - "$tag" "$(basename "${c%%:*}")" "$wall" "$WORK/out.json" >> "$WORK/rows.jsonl" <<'PY'
import json, sys
tag, case, wall, path = sys.argv[1:]
try:
    v = json.load(open(path))
except ValueError:
    v = {"status": "NO_RESULT"}
p = v.get("performance") or {}
print(json.dumps({"tag": tag, "case": case, "wall": float(wall), "status": v.get("status"),
                  "split": v.get("time_split", {}), "speedup": p.get("speedup"),
                  "interval": p.get("speedup_interval")}))
PY
}
if [ -n "${LLC_MIB:-}" ]; then
    for bin in "$OLD" "$NEW"; do
        st="$WORK/$(tag_of "$bin")"
        "$bin" --store "$st" hw > /dev/null 2>&1
        python3 - "$st/hw.json" "$LLC_MIB" <<'PY'
import json, sys
path, mib = sys.argv[1], int(sys.argv[2])
hw = json.load(open(path))
top = max(c["level"] for c in hw["caches"])
for c in hw["caches"]:
    if c["level"] == top:
        c["bytes"] = mib << 20
json.dump(hw, open(path, "w"))
PY
    done
    echo "# last-level cache reported as $LLC_MIB MiB"
fi
for c in $CASES; do # warm: references, builds, roofline, compiled references and baselines
    for bin in "$OLD" "$NEW"; do
        "$bin" --store "$WORK/$(tag_of "$bin")" eval "${c%%:*}" "${c#*:}" > /dev/null 2>&1 || true
    done
done
for _ in $(seq "$REPS"); do
    for c in $CASES; do
        run "$OLD" "$c"
        run "$NEW" "$c"
    done
done
# The raw rows survive the run (they are what the table is made from).
mkdir -p benches/results
cp "$WORK/rows.jsonl" "${ROWS_OUT:-benches/results/throughput-rows.jsonl}"
python3 - "$WORK/rows.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs) if xs else 0.0
print("| case | binary | wall s | kernel+XLA s | harness s | harness share | speedup | status | harness parts (new) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
cases = list(dict.fromkeys(r["case"] for r in rows))
total = {}
for case in cases:
    for tag in ("old", "new"):
        rs = [r for r in rows if r["case"] == case and r["tag"] == tag]
        if not rs:
            continue
        wall = med([r["wall"] for r in rs])
        timed = med([r["split"].get("kernel_s", 0) + r["split"].get("baseline_s", 0) for r in rs])
        harness = med([r["split"].get("harness_s", 0) for r in rs])
        total.setdefault(tag, []).append((wall, harness, timed))
        sp = [r for r in rs if r["speedup"]]
        speed = ""
        if sp:
            s = sp[0]
            speed = f"{s['speedup']:.2f}x"
            if s.get("interval"):
                speed += f" ({s['interval'][0]:.2f}-{s['interval'][1]:.2f})"
        parts = ""
        h = rs[0]["split"].get("harness")
        if h:
            parts = " ".join(f"{k[:-2]} {v:.1f}" for k, v in h.items() if isinstance(v, float) and v >= 0.05)
            b = " ".join(f"{k[:-2]} {v:.1f}" for k, v in (h.get("buffer_parts") or {}).items() if v >= 0.05)
            if b:
                parts += f" (buffers: {b})"
        print(f"| {case} | {tag} | {wall:.1f} | {timed:.2f} | {harness:.1f} | {harness / max(wall, 1e-9):.0%} | {speed} | {','.join(sorted({str(r['status']) for r in rs}))} | {parts} |")
for tag, xs in total.items():
    w = sum(x[0] for x in xs)
    h = sum(x[1] for x in xs)
    # The goal (issue 12): harness at most 0.5 s beyond the timed time; the looser reading
    # allows 0.5 s plus the kernel's and the baseline's timed time.
    strict = sum(x[1] <= 0.5 for x in xs)
    loose = sum(x[1] <= 0.5 + x[2] for x in xs)
    print(f"\n{tag}: {len(xs)} cases, {w:.0f} s wall in all, harness {h:.0f} s ({h / max(w, 1e-9):.0%}), median harness per candidate {med([x[1] for x in xs]):.1f} s; harness <= 0.5 s in {strict}, <= 0.5 s + kernel + XLA time in {loose}")
PY
