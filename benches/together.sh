#!/usr/bin/env bash
# Side by side vs apart: how much two candidates' comparison moves when each is timed in its own
# evaluation (speedup over XLA each, divided) against timing them together (`ksmith eval TASK A B`:
# the same rounds and baseline calls, candidate over candidate per round).
#   bash benches/together.sh [KSMITH] [TASK] [REPEATS]
# Two pairs: A/A (the fast solution against a copy of itself: the truth is 1.00x) and the naive
# solution against the fast one. Prints each repeat's ratio both ways and the spread over repeats.
set -euo pipefail
cd "$(dirname "$0")/.."
KSMITH=${1:-target/release/ksmith}
TASK=${2:-tasks/starter/softmax}
REPS=${3:-4}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/store"
[ -f .ksmith/hw.json ] && cp .ksmith/hw.json "$WORK/store/"
cp -r "$TASK/solutions/fast" "$WORK/copy"
sed -i "0,/^name = \"\(.*\)\"/s//name = \"\1_copy\"/" "$WORK/copy/solution.toml"
FAST="$TASK/solutions/fast"
NAIVE="$TASK/solutions/naive"
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); task $TASK"
ks() { "$KSMITH" --store "$WORK/store" eval "$TASK" "$@" --json 2> /dev/null || true; }
for i in $(seq 1 "$REPS"); do
    ks "$FAST" > "$WORK/a.json"
    ks "$WORK/copy" > "$WORK/b.json"
    ks "$NAIVE" > "$WORK/n.json"
    ks "$FAST" "$WORK/copy" > "$WORK/ab.json"
    ks "$FAST" "$NAIVE" > "$WORK/fn.json"
    python3 - "$WORK" "$i" >> "$WORK/rows.jsonl" <<'PY'
import json, sys
w, i = sys.argv[1], int(sys.argv[2])
load = lambda n: json.load(open(f"{w}/{n}.json"))
sp = lambda v: v["performance"]["speedup"]
a, b, n = load("a"), load("b"), load("n")
ab, fn = load("ab"), load("fn")
print(json.dumps({
    "rep": i,
    "aa_apart": sp(b) / sp(a),
    "aa_together": ab["versus"][1][0]["speedup"],
    "aa_interval": ab["versus"][1][0]["interval"],
    "fn_apart": sp(a) / sp(n),
    "fn_together": fn["versus"][0][1]["speedup"],
    "fn_interval": fn["versus"][0][1]["interval"],
}))
PY
done
python3 - "$WORK/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| repeat | A/A apart | A/A together (95%) | fast/naive apart | fast/naive together (95%) |")
print("| --- | --- | --- | --- | --- |")
for r in rows:
    print(f"| {r['rep']} | {r['aa_apart']:.2f}x | {r['aa_together']:.2f}x ({r['aa_interval'][0]:.2f}-{r['aa_interval'][1]:.2f}) "
          f"| {r['fn_apart']:.2f}x | {r['fn_together']:.2f}x ({r['fn_interval'][0]:.2f}-{r['fn_interval'][1]:.2f}) |")
def spread(k):
    v = [r[k] for r in rows]
    return f"{min(v):.2f}-{max(v):.2f} (max/min {max(v) / min(v):.2f})"
print()
print(f"A/A apart: {spread('aa_apart')}; together: {spread('aa_together')}")
print(f"fast/naive apart: {spread('fn_apart')}; together: {spread('fn_together')}")
PY
