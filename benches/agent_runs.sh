#!/usr/bin/env bash
# Agent runs (`optimize --model` without --strategy: the loop search) measured end to end with a real model, one run at a time on a quiet machine.
#
#   bash benches/agent_runs.sh MODEL [ITERATIONS] [TASK...]
#
# MODEL is any --model spec; with `manual:` give a directory prefix (`manual:/tmp/answers`): each
# task's prompts go to PREFIX/TASK, where a person or another agent session answers them.
# TASKs default to every task under benches/agent-tasks. Per task: the run, then every node
# written out (`ksmith show RUN --write`) and re-timed side by side once more (`ksmith eval TASK
# node0 node1 ...`), so the winner is compared with every node in the same rounds twice: at
# the end of the run, and again here. Prints the run's report lines and the re-timing.
set -euo pipefail
cd "$(dirname "$0")/.."

model=${1:?usage: benches/agent_runs.sh MODEL [ITERATIONS] [TASK...]}
iterations=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(swiglu gemv_bias_relu row_cumsum)

cargo build --release --locked -q -p ksmith-cli
ksmith=$PWD/target/release/ksmith
work=$(mktemp -d -t ksmith-agent-runs-XXXX)
echo "work directory: $work (load $(cut -d' ' -f1-3 /proc/loadavg))"

for t in "${tasks[@]}"; do
    src=benches/agent-tasks/$t
    [ -f "$src/task.toml" ] || { echo "no task $src" >&2; exit 2; }
    cp -r "$src" "$work/$t"
    spec=$model
    case $model in manual:*) spec="$model/$t" ;; esac
    store=$work/store-$t
    start=$(date +%s)
    "$ksmith" --store "$store" optimize "$work/$t" --model "$spec" --iterations "$iterations" \
        --out "$work/out-$t" > "$work/$t.log" 2>&1 || { echo "$t: the run failed, see $work/$t.log"; continue; }
    wall=$(( $(date +%s) - start ))
    run=$(grep -o 'search run-[0-9a-f-]*' "$work/$t.log" | head -1 | cut -d' ' -f2)
    echo
    echo "== $t: run $run, ${wall} s wall"
    grep -E '^\| [0-9]|^LLM calls|^Winner' "$work/out-$t/report.md" | grep -v '^| M=' || true
    "$ksmith" --store "$store" show "$run" --write "$work/nodes-$t" > /dev/null
    echo "-- every node re-timed side by side (load $(cut -d' ' -f1-3 /proc/loadavg)):"
    # shellcheck disable=SC2046
    "$ksmith" --store "$store" eval "$work/$t" $(ls -d "$work/nodes-$t"/node* | sort -V) 2>&1 || true
done
