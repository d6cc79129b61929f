#!/usr/bin/env bash
# Benchmarks and the retention evaluation (issue 9): `bench/run --quick`.
#
# Runs every bench/bench_*.py module in its quick mode plus `dream eval --model offline`, prints
# every table, and compares the gated figures with the committed bench/baseline.json. It fails
# only when a module fails, or when a deterministic figure (token counts, calls, entries,
# commits, the eval's failed items) or a ratio of two timings measured side by side in the same
# run regresses by more than 2x. Wall times are printed and warned about, never gated.
# Budget: under 3 minutes on 2 cores. docs/benchmarks.md is not rewritten here (full runs do that).
#
# Run from anywhere with .venv ready (as .ci/run does): bash ci/steps/80-bench.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
PY="$(pwd)/.venv/bin/python"
say() { printf 'bench: %s\n' "$*"; }

[ -x "$PY" ] || { say "FAIL: $PY not found: build the venv first (.ci/run does)" >&2; exit 1; }
export BENCH_PYTHON="$PY"
export LITELLM_LOCAL_MODEL_COST_MAP=True
export PYTHONDONTWRITEBYTECODE=1

say "bench/run --quick (gated against bench/baseline.json)"
start=$(date +%s)
rc=0
"$PY" bench/run --quick --no-write || rc=$?
say "--quick took $(( $(date +%s) - start )) s (budget 180 s); exit $rc"
exit "$rc"
