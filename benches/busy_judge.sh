#!/usr/bin/env bash
# Decisions on a busy machine (issue 29): the same pair of kernels (starter softmax fast as the
# challenger, naive as the incumbent, on its first workload) compared side by side with
# `ksmith eval TASK naive fast --json`, REPEATS times (default 3) in each setting:
#   alone       nothing else of ours running;
#   two-stores  a second store judging vector_add at the same time (its own ksmith process, a
#               loop of evaluations), which the machine-wide device lock keeps apart;
#   busy        a neighbour busy on every core (2 x cores shell busy loops);
#   aa-busy     A/A with the busy neighbour: fast against a byte-different copy of itself.
# The right decision is "better" for fast over naive and anything but "better" for A/A. Per
# setting: how often the decision rule (crates/ksmith-judge/src/decide.rs) decided right, wrong
# and undecided, how often the old rule (the point estimate above 1.00) would have been right,
# rounds dropped and comparisons marked never quiet, and the median wall time per comparison.
#   bash benches/busy_judge.sh [KSMITH] [REPEATS]
# SETTINGS="busy aa-busy" runs only those settings.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ksmith=${1:-$root/target/debug/ksmith}
repeats=${2:-3}
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
# A private machine lock directory: the bench's processes meet each other, not other runs.
export KSMITH_LOCK_DIR=$work/locks
cores=$(nproc)

# softmax cut to its first workload; a byte-different copy of fast for A/A.
cp -r "$root/tasks/starter/softmax" "$work/softmax"
python3 - "$work/softmax/task.toml" <<'PY'
import sys
p = sys.argv[1]
parts = open(p).read().split("[[workloads]]")
open(p, "w").write(parts[0] + "[[workloads]]" + parts[1])
PY
cp -r "$root/tasks/starter/softmax/solutions/fast" "$work/fast_copy"
for f in "$work"/fast_copy/*.c; do printf '\n/* copy */\n' >>"$f"; done
# The solution's own name only (its tunables have `name =` lines too).
sed -i '0,/^name *= *"\([^"]*\)"/s//name = "\1_copy"/' "$work/fast_copy/solution.toml"
task=$work/softmax
naive=$task/solutions/naive
fast=$task/solutions/fast
for s in a b; do
    mkdir -p "$work/store-$s"
    [ -f "$root/target/ksmith-test-store/hw.json" ] && cp "$root/target/ksmith-test-store/hw.json" "$work/store-$s/"
done
# References first (untimed).
"$ksmith" --store "$work/store-a" eval "$task" "$fast" --no-timing >/dev/null 2>&1
"$ksmith" --store "$work/store-b" eval "$root/tasks/starter/vector_add" "$root/tasks/starter/vector_add/solutions/fast" --no-timing >/dev/null 2>&1

busy_on() { for _ in $(seq $((2 * cores))); do sh -c 'while :; do :; done' & pids+=($!); done; }
busy_off() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); }
second_store_on() {
    ( while :; do "$ksmith" --store "$work/store-b" eval "$root/tasks/starter/vector_add" \
        "$root/tasks/starter/vector_add/solutions/naive" --again --min-time-ms 200 >/dev/null 2>&1; done ) &
    pids+=($!)
}

rows=$work/rows.jsonl
: >"$rows"
run() { # setting incumbent challenger expected(better|not)
    local start end
    for i in $(seq "$repeats"); do
        start=$(date +%s.%N)
        "$ksmith" --store "$work/store-a" eval "$task" "$2" "$3" --json --again >"$work/out.json" 2>"$work/err.txt" || true
        end=$(date +%s.%N)
        python3 - "$1" "$4" "$start" "$end" "$work/out.json" >>"$rows" <<'PY'
import json, sys
setting, expected, start, end, path = sys.argv[1:]
try:
    v = json.load(open(path))
    d = v["decisions"][0]["decision"]
    rel = v["versus"][1][0]
    point = rel["speedup"] if rel else None
    perf = [r.get("performance") or {} for r in v["results"]]
    dropped = sum(w.get("disturbance", {}).get("rounds_dropped", 0) for p in perf for w in p.get("workloads", []))
    never = any(p.get("never_quiet") for p in perf)
    word = d["decision"]
except Exception as e:  # a failed run is a row too
    word, point, dropped, never = "error", None, 0, False
print(json.dumps({"setting": setting, "expected": expected, "decision": word, "point": point,
                  "dropped": dropped, "never_quiet": never, "wall_s": float(end) - float(start)}))
PY
    done
}

settings=" ${SETTINGS:-alone two-stores busy aa-busy} "
want() { [[ $settings == *" $1 "* ]]; }
if want alone; then run alone "$naive" "$fast" better; fi
if want two-stores; then second_store_on; run two-stores "$naive" "$fast" better; busy_off; fi
if want busy || want aa-busy; then busy_on; fi
if want busy; then run busy "$naive" "$fast" better; fi
if want aa-busy; then run aa-busy "$fast" "$work/fast_copy" not; fi
busy_off
cp "$rows" "$root/benches/results/busy_judge-rows.jsonl" 2>/dev/null || true

python3 - "$rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| setting | runs | errors | right (rule) | wrong (rule) | undecided | right (point > 1.00) | rounds dropped | never quiet | median s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for s in ["alone", "two-stores", "busy", "aa-busy"]:
    rs = [r for r in rows if r["setting"] == s]
    if not rs:
        continue
    def right(r):
        if r["decision"] == "error":
            return False
        return r["decision"] == "better" if r["expected"] == "better" else r["decision"] != "better"
    def wrong(r):
        return r["decision"] != "undecided" and r["decision"] != "error" and not right(r)
    def point_right(r):
        if r["point"] is None:
            return False
        return (r["point"] > 1.0) == (r["expected"] == "better")
    print(f"| {s} | {len(rs)} | {sum(r['decision'] == 'error' for r in rs)} | {sum(map(right, rs))} | {sum(map(wrong, rs))} | "
          f"{sum(r['decision'] == 'undecided' for r in rs)} | {sum(map(point_right, rs))} | "
          f"{sum(r['dropped'] for r in rs)} | {sum(r['never_quiet'] for r in rs)} | "
          f"{statistics.median(r['wall_s'] for r in rs):.0f} |")
PY
