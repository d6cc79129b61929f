#!/usr/bin/env bash
# Static proof of the deployment files, with validators from PyPI installed into .venv-tools:
#   hadolint (Dockerfiles), check-jsonschema (action.yml against GitHub's action metadata schema,
#   every workflow against the workflow schema), actionlint, zizmor --offline, kubernetes-validate
#   --strict (Kubernetes 1.37 and 1.33), yamllint; also on what `dream schedule --format github|k8s`
#   prints. No network besides the package index for the one-time install.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/docker/lib.sh
t0=$(date +%s)
tools_venv
T="$TOOLS_VENV/bin"
gen="$(mktemp -d "${TMPDIR:-/tmp}/dream-validators.XXXXXX")"
trap 'rm -rf "$gen"' EXIT

# What `dream schedule` generates must pass the same checks as the files in the repository.
.venv/bin/dream schedule --workspace "$gen/ws" --format github >"$gen/dream-schedule-github.yml"
.venv/bin/dream schedule --workspace "$gen/ws" --format k8s >"$gen/dream-schedule-k8s.yaml"

workflows=(docs/examples/dream-pr.yml docs/examples/dream-direct.yml ci/docker/act/dream-action.yml
  "$gen/dream-schedule-github.yml")
for f in .github/workflows/*.yml .github/workflows/*.yaml; do [ -e "$f" ] && workflows+=("$f"); done
manifests=(deploy/kubernetes/*.yaml "$gen/dream-schedule-k8s.yaml")

run() { printf -- '--- %s\n' "$*"; "$@"; }
run "$T/hadolint" Dockerfile ci/docker/runner.Dockerfile
actions=(action.yml ci/docker/act/stand-ins/*/action.yml)
run "$T/check-jsonschema" --builtin-schema vendor.github-actions "${actions[@]}"
run "$T/check-jsonschema" --builtin-schema vendor.github-workflows "${workflows[@]}"
run "$T/actionlint" "${workflows[@]}"
# zizmor's remaining inline ignores are explained where they stand (docs/deploy-github-actions.md).
run "$T/zizmor" --offline --min-severity low "${actions[@]}" "${workflows[@]}"
run "$T/kubernetes-validate" --strict --quiet "${manifests[@]}"
run "$T/kubernetes-validate" --strict --quiet -k 1.33.0 "${manifests[@]}"
run "$T/yamllint" --strict -c ci/docker/yamllint.yml "${actions[@]}" "${workflows[@]}" "${manifests[@]}"
echo "50-validators.sh: all validators passed in $(( $(date +%s) - t0 )) s"
