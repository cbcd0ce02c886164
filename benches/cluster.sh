#!/usr/bin/env bash
# Scale-out throughput: the same suite benched here (--jobs 1 and 2) and on a local Ray cluster
# of 1 and 2 worker nodes (`ksmith cluster local`), configurations alternating round by round
# so machine drift hits all of them:
#   bash benches/cluster.sh [KSMITH] [SUITE] [ROUNDS]
# Prints per configuration and round the wall time, candidates per minute and the suite's
# geomean speedup. REPEAT=N judges every solution N times per bench. Every worker node here shares this machine's cores (see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
KS=${1:-target/debug/ksmith}
SUITE=${2:-tasks/starter}
ROUNDS=${3:-2}
SOL=${SOL:-fast}
REPEAT=${REPEAT:-1} # every solution judged this many times per bench (more work to spread)
WORK=$(mktemp -d)
CLUSTER_PID=
cleanup() {
    [ -n "$CLUSTER_PID" ] && kill -INT "$CLUSTER_PID" 2> /dev/null && wait "$CLUSTER_PID" || true
    rm -rf "$WORK"
}
trap cleanup EXIT
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); suite $SUITE --solution $SOL"

start_cluster() { # workers -> sets ADDR
    "$KS" cluster local --workers "$1" --dir "$WORK/ray-$1" > "$WORK/addr" 2> "$WORK/cluster.log" &
    CLUSTER_PID=$!
    for _ in $(seq 600); do
        [ -s "$WORK/addr" ] && break
        kill -0 "$CLUSTER_PID" 2> /dev/null || { cat "$WORK/cluster.log"; exit 1; }
        sleep 0.2
    done
    ADDR=$(head -1 "$WORK/addr")
}
stop_cluster() {
    kill -INT "$CLUSTER_PID"
    wait "$CLUSTER_PID" || true
    CLUSTER_PID=
}
bench() { # store, name, extra args... -> one row
    local store=$1 name=$2 start wall
    shift 2
    start=$(date +%s.%N)
    "$KS" --store "$WORK/store-$store" bench "$SUITE" --solution "$SOL" --repeat "$REPEAT" --fresh --json -q "$@" \
        > "$WORK/out.json" 2> "$WORK/bench.log" || { tail -5 "$WORK/bench.log"; return 1; }
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    python3 - "$name" "$wall" "$WORK/out.json" <<'PY'
import json, math, sys
name, wall, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
v = json.load(open(path))
rows = v["rows"]
passed = [r["speedup"] for r in rows if r["status"] == "PASSED" and r.get("speedup")]
geo = math.exp(sum(math.log(s) for s in passed) / len(passed)) if passed else float("nan")
print(f"| {name} | {wall:.1f} | {len(rows)} | {60 * len(rows) / wall:.2f} | {len(passed)}/{len(rows)} | {geo:.2f} |")
PY
}

echo "| configuration | wall s | candidates | per minute | passed | geomean speedup |"
echo "| --- | --- | --- | --- | --- | --- |"
# Warm-up (not shown): the device stores' roofline, builds and references.
start_cluster 2
bench ray warmup --cluster "$ADDR" > /dev/null
stop_cluster
bench local warmup --cluster local > /dev/null
for r in $(seq "$ROUNDS"); do
    bench local "local --jobs 1 (round $r)" --cluster local --jobs 1
    bench local "local --jobs 2 (round $r)" --cluster local --jobs 2
    start_cluster 1
    bench ray "ray, 1 worker node (round $r)" --cluster "$ADDR"
    stop_cluster
    start_cluster 2
    bench ray "ray, 2 worker nodes (round $r)" --cluster "$ADDR"
    stop_cluster
done
