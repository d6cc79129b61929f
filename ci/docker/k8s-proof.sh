#!/usr/bin/env bash
# The Kubernetes manifests in deploy/kubernetes/, each run with docker as declared
# (ci/docker/k8s_sim.py: securityContext, env, volumes, init containers, podFailurePolicy,
# backoff limits, deadlines and the grace period, taken from the YAML):
#   - cronjob-pvc.yaml over a volume whose driver ignores fsGroup (files owned by the agent, uid
#     1000): the pod exits 2 at once, podFailurePolicy FailJob ends the Job after that one pod;
#     the same volume with fsGroup applied: the Job completes;
#   - indexed-job.yaml over three such workspaces: one pod per index, each FailIndex;
#   - cronjob-git.yaml (the `git` target) over 5 batches whose 4th waits on a model that does not
#     answer: the deadline stops the pod (SIGTERM, within the grace period) and the 3 committed
#     batches are on the remote, pushed as they were made.
# Needs a running private dockerd and the image (container-proof.sh builds it); builds the git
# target. Results go to $DREAM_CI_ROOT/k8s-proof.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
PY="$REPO_ROOT/.venv/bin/python"
DREAM="$REPO_ROOT/.venv/bin/dream"
export DOCKER

work="$(mktemp -d "${TMPDIR:-/tmp}/dream-k8s.XXXXXX")"
chmod 755 "$work"
server_pid=""
hang_pid=""
cleanup() {
  local ids
  ids="$("$DOCKER" ps -aq --filter name=k8s-sim- 2>/dev/null || true)"
  [ -n "$ids" ] && "$DOCKER" rm -f $ids >/dev/null 2>&1
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  [ -n "$hang_pid" ] && kill "$hang_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
results="$DREAM_CI_ROOT/k8s-proof.md"
: >"$results"
record() { printf '%s\n' "$*" | tee -a "$results"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
field() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

start_scripted_server "$work"
sim() {  # sim NAME MANIFEST ARGS...: run the manifest's Job; the result lands in $work/NAME.json
  local name="$1" manifest="$2"
  shift 2
  "$PY" ci/docker/k8s_sim.py "deploy/kubernetes/$manifest" --workdir "$work/$name" --out "$work/$name.json" \
    --secret dream-llm/api-key=dummy-llm-key "$@" >/dev/null
}
agents_workspace() {  # agents_workspace DIR: a workspace with history, owned by the agent (uid 1000)
  "$DREAM" init --workspace "$1" >/dev/null
  "$DREAM" append --workspace "$1" --session-key cli:direct "- [durable] User fact number 1: prefers option 1 for setting 1." >/dev/null
  chown -R 1000:1000 "$1"
  chmod 755 "$1"
}
scripted=(--env "dream:DREAM_MODEL=openai/scripted" --env "dream:DREAM_API_BASE=http://127.0.0.1:$port/v1")

# ---- cronjob-pvc.yaml ------------------------------------------------------------------------------
agents_workspace "$work/pvc"
sim pvc-ignored cronjob-pvc.yaml --image "dream-memory:0.1.0=$IMAGE" --pvc "dream-workspace=$work/pvc" \
  --fsgroup-ignored dream-workspace "${scripted[@]}"
[ "$(field "$work/pvc-ignored.json" 'd["pods"], d["reason"], d["containers"][0]["exit"]')" = "(1, 'PodFailurePolicy', 2)" ] \
  || { cat "$work/pvc-ignored.json" >&2; die "cronjob-pvc.yaml over a foreign workspace did not end after one pod with exit 2"; }
secs=$(field "$work/pvc-ignored.json" 'd["containers"][0]["seconds"]')
record "- cronjob-pvc.yaml, volume that ignores fsGroup, files owned by uid 1000: the pod exits 2 in $secs s; podFailurePolicy FailJob: the Job fails after **1 pod**"
sed 's/^/    /' "$work/pvc-ignored/pod-0-dream.err" | head -n 2 | tee -a "$results"
sim pvc-fsgroup cronjob-pvc.yaml --image "dream-memory:0.1.0=$IMAGE" --pvc "dream-workspace=$work/pvc" "${scripted[@]}"
[ "$(field "$work/pvc-fsgroup.json" 'd["condition"], d["pods"]')" = "('Complete', 1)" ] \
  || { cat "$work/pvc-fsgroup.json" "$work"/pvc-fsgroup/*.err >&2; die "cronjob-pvc.yaml with fsGroup applied did not complete"; }
record "- the same volume with fsGroup applied (group 10001, g+rwX, setgid): the Job completes ($(field "$work/pvc-fsgroup.json" 'd["seconds"]') s)"

# ---- indexed-job.yaml ------------------------------------------------------------------------------
for name in $(sed -n '/workspaces: |/,/^---/p' deploy/kubernetes/indexed-job.yaml | sed -n 's/^    \([a-z-]*\)$/\1/p'); do
  agents_workspace "$work/rwx/$name"
done
sim indexed indexed-job.yaml --image "dream-memory:0.1.0=$IMAGE" --pvc "dream-workspaces=$work/rwx" \
  --fsgroup-ignored dream-workspaces "${scripted[@]}"
[ "$(field "$work/indexed.json" 'd["pods"], d["failed_indexes"], sorted({c["exit"] for c in d["containers"]})')" = "(3, [0, 1, 2], [2])" ] \
  || { cat "$work/indexed.json" >&2; die "indexed-job.yaml: expected one pod per index, each exit 2 and FailIndex"; }
record "- indexed-job.yaml, three such workspaces: **3 pods** (one per index), each exit 2 and FailIndex ($(field "$work/indexed.json" 'd["seconds"]') s)"

# ---- cronjob-git.yaml: stopped at the deadline after 3 batches ---------------------------------------
t0=$(now)
DOCKER_BUILDKIT=1 "$DOCKER" build --network host --target git -t "$IMAGE-git" . >"$work/build-git.log" 2>&1 \
  || { tail -n 30 "$work/build-git.log" >&2; die "docker build --target git failed"; }
record "- docker build --target git: $(elapsed "$t0" "$(now)") s, $(( $("$DOCKER" image inspect --format '{{.Size}}' "$IMAGE-git") / 1000000 )) MB"
remote="$work/remote.git"
git init -q --bare -b main "$remote"
git clone -q "$remote" "$work/seed" 2>/dev/null
"$DREAM" init --workspace "$work/seed" >/dev/null
printf '{"agents": {"defaults": {"dream": {"maxBatchSize": 1}}}}\n' >"$work/seed/dream.json"
for i in 1 2 3 4 5; do
  "$DREAM" append --workspace "$work/seed" --session-key cli:direct "- [durable] User fact number $i: prefers option $i for setting $i." >/dev/null
done
git -C "$work/seed" add -A -- . ':!memory/*.lock'
git -C "$work/seed" -c user.name=agent -c user.email=agent@localhost commit -q -m "agent: workspace and history"
git -C "$work/seed" push -q origin HEAD:refs/heads/main
chown -R 10001:10001 "$remote"
"$PY" ci/docker/llm-hang-on.py "fact number 4" --port-file "$work/hang.port" --hung-file "$work/hung" \
  --record "$work/hang-requests.jsonl" >"$work/hang.log" 2>&1 &
hang_pid=$!
for _ in $(seq 1 100); do [ -s "$work/hang.port" ] && break; sleep 0.1; done
sim git cronjob-git.yaml --image "dream-memory:0.1.0-git=$IMAGE-git" --secret dream-git/token=dummy-git-token \
  --mount "$remote:/remote" --env clone:DREAM_GIT_URL=/remote --env dream:DREAM_GIT_URL=/remote \
  --env dream:DREAM_MODEL=openai/scripted --env "dream:DREAM_API_BASE=http://127.0.0.1:$(cat "$work/hang.port")/v1" \
  --deadline-at-file "$work/hung"
kill "$hang_pid" 2>/dev/null; wait "$hang_pid" 2>/dev/null || true; hang_pid=""
[ "$(field "$work/git.json" 'd["reason"], d["containers"][-1]["exit"]')" = "('DeadlineExceeded', 143)" ] \
  || { cat "$work/git.json" "$work"/git/*.err >&2; die "cronjob-git.yaml: expected a deadline stop with exit 143"; }
stop=$(field "$work/git.json" 'd["containers"][-1]["stop_seconds"]')
dreams=$(git --git-dir "$remote" log --format=%s main | grep -c '^dream: ' || true)
cursor=$(git --git-dir "$remote" show main:memory/.dream_cursor)
[ "$dreams" -eq 3 ] && [ "$cursor" = 3 ] || die "after the deadline the remote has $dreams Dream commits (cursor $cursor); expected 3 (cursor 3)"
grace=$(sed -n 's/^ *terminationGracePeriodSeconds: \([0-9]*\).*/\1/p' deploy/kubernetes/cronjob-git.yaml)
record "- cronjob-git.yaml, 5 batches, the 4th waiting on a model that never answers when the deadline comes: the pod stopped in $stop s (grace ${grace} s), exit 143; **the remote's main has the 3 committed batches** (cursor 3), pushed one by one:"
grep '^dream-git-sync: \(pushed\|stopped\)' "$work/git/pod-0-dream.err" | sed 's/^/    /' | tee -a "$results"
log "the Kubernetes manifests passed under docker"
