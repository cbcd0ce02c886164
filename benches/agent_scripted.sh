#!/usr/bin/env bash
# What an agent run costs, measured on the scripted end-to-end scenario of the tests
# (softmax from the naive kernel: iteration 1 parallelizes rows, iteration 2 vectorizes exp;
# the autotuner and the profiler run for real). Prints wall time, calls, tokens (estimated
# by the scripted provider at 4 characters per token, i.e. what a real model would be sent)
# and the speedups per snapshot.
#   bash benches/agent_scripted.sh            (uses target/release/ksmith; builds it if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
KSMITH=${KSMITH:-target/release/ksmith}
[ -x "$KSMITH" ] || cargo build --release -q
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import sys, pathlib
work = pathlib.Path(sys.argv[1])
naive = open("tasks/starter/softmax/solutions/naive/kernel.c").read()
omp = naive.replace("    for (int64_t i = 0; i < M; i++) {", "    #pragma omp parallel for\n    for (int64_t i = 0; i < M; i++) {", 1)
fast = open("tasks/starter/softmax/solutions/fast/kernel.c").read()
def reply(role, text):
    return f"[[reply]]\nrole = \"{role}\"\ntext = '''\n{text}'''\n\n"
def plan(s, e):
    return f"## Strategy\n{s}\n## Expected effect\n{e}\n## Risks\nTails.\n"
full = lambda src: f"kernel.c\n```c\n{src}```\n"
(work / "scenario.toml").write_text("".join([
    reply("planner", plan("Parallelize the rows with OpenMP.", "1.8x")),
    reply("implementer", full(omp)),
    reply("profile", "Scalar expf dominates; vectorize the exp.\n"),
    reply("planner", plan("Vectorize exp with a polynomial and fuse the passes.", "3x")),
    reply("implementer", full(fast)),
    reply("autotune", "```toml\n[[tunables]]\nname = \"CHUNK\"\nvalues = [4, 8, 16]\n```\n"),
    reply("profile", "Memory bound now.\n"),
]))
PY
start=$(date +%s.%N)
"$KSMITH" --store "$work/store" optimize tasks/starter/softmax --model "scripted:$work/scenario.toml" \
    --iterations 2 --tune-budget 3 --out "$work/out" >"$work/log" 2>&1
end=$(date +%s.%N)
id=$(grep -o 'run-[0-9]*-[0-9a-f]*' "$work/log" | head -1)
"$KSMITH" --store "$work/store" show "$id" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
wall = float(sys.argv[1])
llm = v["llm"]
print(f"| wall | LLM calls | tokens in | tokens out | snapshots (speedup vs XLA) |")
print(f"| --- | --- | --- | --- | --- |")
snaps = ", ".join("%d: %.2fx" % (s["iteration"], s["speedup"]) for s in v["snapshots"] if s["speedup"])
print("| %.0f s | %d | %d | %d | %s |" % (wall, llm["calls"], llm["tokens_in"], llm["tokens_out"], snaps))
' "$(echo "$end - $start" | bc)"
"$KSMITH" --store "$work/store" calls "$id" | sed -n '1,40p'
