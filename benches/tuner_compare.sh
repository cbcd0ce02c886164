#!/usr/bin/env bash
# Autotuner comparison: `ksmith tune` against Kernel Tuner on the same C kernels and search spaces
# (KSBench gemm, swiglu_mlp, grouped_gemm by default). Metric: evaluations and wall time needed to
# reach within 5% of the exhaustive best; benches/tuner_compare.py documents the method.
#
#   bash benches/tuner_compare.sh                          # everything: ~40 min on 2 cores
#   bash benches/tuner_compare.sh --tasks grouped_gemm --repeats 1 --kt-strategies random_sample
#   bash benches/tuner_compare.sh --help                   # all options
#
# Creates (once) a virtualenv in target/bench-venv with Kernel Tuner and the versions tested here,
# builds ksmith (cargo build --release; --skip-build to use the existing binary), then runs
# benches/tuner_compare.py with the other arguments. Markdown tables go to stdout, progress to
# stderr, raw results to benches/results/tuner_compare.json (--out). Needs python3 >= 3.11
# with venv, gcc with OpenMP, and a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=target/bench-venv
# Tested together on Python 3.11 (kernel-tuner's C backend, numpy inputs, jax float64 references).
PINS="kernel-tuner==1.5.0 numpy==2.4.6 scipy==1.17.1 scikit-learn==1.9.1 python-constraint2==2.9.0 jax==0.10.2 jaxlib==0.10.2 tomli-w==1.2.0"
if [ "$(cat "$VENV/.pins" 2>/dev/null || true)" != "$PINS" ]; then
    echo "tuner_compare: setting up $VENV ($PINS)" >&2
    python3 -m venv "$VENV"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q $PINS
    echo "$PINS" > "$VENV/.pins"
fi

build=1
args=()
for a in "$@"; do
    if [ "$a" = "--skip-build" ]; then build=0; else args+=("$a"); fi
done
if [ "$build" = 1 ]; then
    cargo build --release -q
fi
exec "$VENV/bin/python" benches/tuner_compare.py "${args[@]}"
