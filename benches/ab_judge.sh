#!/usr/bin/env bash
# Two ksmith binaries side by side, alternating run by run (so machine drift hits both):
#   bash benches/ab_judge.sh aa   OLD_KSMITH NEW_KSMITH [REPEATS]   # A/A repeatability
#   bash benches/ab_judge.sh tune OLD_KSMITH NEW_KSMITH [REPEATS]   # tuner evaluation cost
# aa: the same candidates (starter vector_add and softmax fast, KSBench rmsnorm_llm and
# grouped_gemm seeds) judged REPEATS times (default 5) by each binary after one untimed
# priming evaluation per store; prints per case and binary the speedups, their max/min and
# standard deviation of the log, the median relative width of the 95% intervals and the
# median harness time.
# tune: `ksmith tune --strategy exhaustive --budget 8 --confirm 0` of KSBench gemm and
# grouped_gemm (their first workload, as benches/tuner_compare.sh tunes them) from a primed
# store with no evaluations and no builds, REPEATS times (default 3) per binary: wall time, the
# first result's time, the median gap between results and the median harness per evaluation.
# Rows go to benches/results/ab_judge-<mode>-rows.jsonl (ROWS_OUT).
set -euo pipefail
mode=${1:?usage: ab_judge.sh aa|tune OLD NEW [REPEATS]}
old=${2:?old binary}
new=${3:?new binary}
case "$mode" in
aa) repeats=${4:-5} ;;
tune) repeats=${4:-3} ;;
*) echo "ab_judge.sh: mode must be aa or tune, not '$mode'" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
rows=${ROWS_OUT:-$root/benches/results/ab_judge-$mode-rows.jsonl}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$rows"

# A KSBench task cut to its first workload.
one_workload() {
    cp -r "$root/tasks/ksbench/$1" "$work/$1"
    python3 - "$work/$1/task.toml" <<'PY'
import sys
p = sys.argv[1]
parts = open(p).read().split("[[workloads]]")
open(p, "w").write(parts[0] + "[[workloads]]" + parts[1])
PY
}

record() { # binary-tag case json-file [extra-json]
    python3 - "$1" "$2" "$3" "${4:-{\}}" >>"$rows" <<'PY'
import json, sys
tag, case, path, extra = sys.argv[1:]
d = json.load(open(path))
row = {"tag": tag, "case": case, **json.loads(extra)}
if "performance" in d:
    p = d["performance"]
    row.update(speedup=p["speedup"], interval=p["speedup_interval"], harness=d["time_split"]["harness_s"])
else:
    row.update(rows=d["rows"])
print(json.dumps(row))
PY
}

bin_of() { if [ "$1" = old ]; then echo "$old"; else echo "$new"; fi; }

if [ "$mode" = aa ]; then
    one_workload grouped_gemm
    cases=("$root/tasks/starter/vector_add fast" "$root/tasks/starter/softmax fast"
        "$root/tasks/ksbench/rmsnorm_llm seed" "$work/grouped_gemm seed")
    for i in $(seq 0 "$repeats"); do
        for c in "${cases[@]}"; do
            read -r task sol <<<"$c"
            for tag in old new; do
                "$(bin_of $tag)" eval "$task" "$task/solutions/$sol" --store "$work/store-$tag" \
                    --again --json -q >"$work/one.json" 2>/dev/null || true
                # Round 0 primes each store (references, builds, compiled programs).
                if [ "$i" -gt 0 ] && [ -s "$work/one.json" ]; then
                    record "$tag" "$(basename "$task")" "$work/one.json"
                fi
            done
        done
    done
    python3 - "$rows" <<'PY'
import json, math, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| case | binary | speedups | max/min | sd of log | median interval width | median harness s |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for case in sorted({r["case"] for r in rows}):
    for tag in ("old", "new"):
        s = [r for r in rows if r["case"] == case and r["tag"] == tag]
        if len(s) < 2:
            continue
        sp = [r["speedup"] for r in s]
        width = st.median((r["interval"][1] - r["interval"][0]) / r["speedup"] for r in s)
        print(f"| {case} | {tag} | {' '.join(f'{x:.2f}' for x in sp)} | {max(sp) / min(sp):.2f} | "
              f"{st.stdev(math.log(x) for x in sp):.3f} | {width:.2f} | {st.median(r['harness'] for r in s):.2f} |")
PY
    exit 0
fi

one_workload gemm
one_workload grouped_gemm
for t in gemm grouped_gemm; do
    for tag in old new; do
        "$(bin_of $tag)" eval "$work/$t" "$work/$t/solutions/seed" --store "$work/prime-$t-$tag" \
            --no-timing -q >/dev/null 2>&1 || true
    done
done
for i in $(seq "$repeats"); do
    for t in gemm grouped_gemm; do
        for tag in old new; do
            run=$work/run
            rm -rf "$run"
            cp -r "$work/prime-$t-$tag" "$run"
            rm -rf "$run/cache/build"
            python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('delete from evaluations'); c.commit()" "$run/ksmith.db"
            start=$(date +%s.%N)
            "$(bin_of $tag)" tune "$work/$t" "$work/$t/solutions/seed" --store "$run" --strategy exhaustive \
                --budget 8 --confirm 0 --json -q >"$work/tune.json" 2>/dev/null
            end=$(date +%s.%N)
            harness=$(python3 -c "
import json, sqlite3, statistics, sys
c = sqlite3.connect(sys.argv[1])
h = [json.loads(j)['time_split']['harness_s'] for (j,) in c.execute('select result_json from evaluations order by id')]
print(json.dumps({'harness': h}))" "$run/ksmith.db")
            record "$tag" "$t" "$work/tune.json" \
                "$(python3 -c "import json,sys; d=json.loads(sys.argv[3]); d['wall']=float(sys.argv[2])-float(sys.argv[1]); print(json.dumps(d))" "$start" "$end" "$harness")"
        done
    done
done
python3 - "$rows" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| task | binary | wall s | first result s | median s between results | median harness s per evaluation (after the first) |")
print("| --- | --- | --- | --- | --- | --- |")
for r in rows:
    t = [x["elapsed_s"] for x in r["rows"]]
    gaps = [b - a for a, b in zip(t, t[1:])]
    print(f"| {r['case']} | {r['tag']} | {r['wall']:.1f} | {t[0]:.2f} | {st.median(gaps):.2f} | {st.median(r['harness'][1:]):.2f} |")
PY
