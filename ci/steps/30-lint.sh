#!/usr/bin/env bash
# ruff (lint and format) and mypy strict over everything CI checks. .ci/run runs this in a
# background lane beside the tests (it needs only .venv), so the gate costs no wall time at the end.
# Run from the repository root with .venv ready: bash ci/steps/30-lint.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
PATHS=(src tests bench bench/run examples scripts deploy ci)
.venv/bin/ruff check "${PATHS[@]}"
.venv/bin/ruff format --check "${PATHS[@]}"
.venv/bin/mypy
echo "30-lint.sh: ruff, ruff format and mypy passed in $(( $(date +%s) - t0 )) s"
