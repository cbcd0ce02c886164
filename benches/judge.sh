#!/usr/bin/env bash
# Judge benchmarks (docs/benchmarks.md): starter bench wall time and table, A/A repeatability,
# and the harness's own overhead per candidate. Run from the repository root on a quiet machine:
#   bash benches/judge.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
KS=./target/release/ksmith
STORE=$(mktemp -d)/store
trap 'rm -rf "$(dirname "$STORE")"' EXIT
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"

echo "## 1. ksmith bench tasks/starter (references cold, then warm)"
for pass in cold warm; do
    start=$(date +%s.%N)
    $KS --store "$STORE" bench tasks/starter --fresh > "$STORE.$pass.txt" 2>/dev/null
    echo "$pass: $(echo "$(date +%s.%N) - $start" | bc) s wall"
done
cat "$STORE.warm.txt"

echo "## 2. A/A: fast solutions evaluated twice in one bench run"
$KS --store "$STORE" bench tasks/starter --solution fast --repeat 2 --fresh | grep -E "A/A|finished"

echo "## 3. Harness overhead on a tiny task (kernel and XLA time ~0)"
TINY=$(dirname "$STORE")/tiny/vector_add
mkdir -p "$TINY"
cp tasks/starter/vector_add/reference.py "$TINY/"
cp -r tasks/starter/vector_add/solutions "$TINY/"
sed '/^\[\[workloads\]\]/,$d' tasks/starter/vector_add/task.toml > "$TINY/task.toml"
for n in 1000 4099 16411; do
    printf '[[workloads]]\naxes = { N = %d }\ninputs = { a = { dist = "normal", mean = 0.0, std = 1.0 }, b = { dist = "uniform", low = -2.0, high = 2.0 } }\n' "$n" >> "$TINY/task.toml"
done
SOL=tasks/starter/vector_add/solutions/fast
$KS --store "$STORE" eval "$TINY" "$SOL" --no-timing > /dev/null 2>&1 || true  # build + references
for mode in "--no-timing" "--flush never" ""; do
    # shellcheck disable=SC2086
    line=$(KSMITH_TRACE_CALLS=1 $KS --store "$STORE" eval "$TINY" "$SOL" $mode 2> "$STORE.trace" | grep "time:")
    echo "eval ${mode:-(default timing)}:$line"
    awk '{c[$2]+=$3; n[$2]++} END {for (k in c) printf "    %-10s %3d calls %8.1f ms\n", k, n[k], c[k]}' "$STORE.trace" | sort
done
echo "bench of 5 identical candidates, correctness only (one trusted server for all):"
mkdir -p "$(dirname "$STORE")/tinysuite"
cp -r "$TINY" "$(dirname "$STORE")/tinysuite/"
$KS --store "$STORE" bench "$(dirname "$STORE")/tinysuite" --solution fast --repeat 5 --fresh --no-timing | grep -E "overhead|finished"
