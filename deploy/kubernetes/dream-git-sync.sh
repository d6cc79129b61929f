#!/usr/bin/env bash
# dream-git-sync: Dream on a git clone, for Kubernetes (deploy/kubernetes/cronjob-git.yaml).
#
#   dream-git-sync clone   init container: clone DREAM_GIT_URL (branch DREAM_GIT_BRANCH) into
#                          DREAM_GIT_DIR
#   dream-git-sync run     main container: run dream-run in that clone and push as it goes: after
#                          every DREAM_GIT_PUSH_EVERY batches the commits so far are pushed, so a
#                          run stopped at its deadline keeps what it committed. If the remote moved
#                          meanwhile (push rejected), fetch, reset to the new head and run those
#                          batches again (a run is idempotent: the cursor lives in the repository),
#                          at most DREAM_GIT_ATTEMPTS times in a row.
#
# Environment:
#   DREAM_GIT_URL         repository to clone (https://... or a path); required for `clone`
#   DREAM_GIT_BRANCH      branch to clone and build on (default: main)
#   DREAM_PUSH_BRANCH     branch to push to (default: DREAM_GIT_BRANCH). When it differs, it is a
#                         review branch rebuilt from DREAM_GIT_BRANCH on every run
#                         (`dream-run --branch`) and force-pushed: open a pull request from it.
#   DREAM_GIT_DIR         where the clone lives (default: /workspace/repo)
#   DREAM_WORKSPACE       the Dream workspace inside the clone (default: DREAM_GIT_DIR)
#   DREAM_GIT_ATTEMPTS    run+push attempts in a row when the remote moves (default: 3)
#   DREAM_GIT_PUSH_EVERY  batches per push (default: 1); each chunk is one dream-run process
#   GIT_TOKEN             optional HTTPS token (from a Secret), or DREAM_GIT_TOKEN_FILE: a file
#                         holding it (a mounted Secret). Read once at start and taken out of the
#                         environment: only git's own processes get it, through a credential
#                         helper, never dream-run (the model-driven process), never a file or URL.
#   DREAM_RUN             the Dream command (default: dream-run); extra arguments after `run` are
#                         passed to it
# Exit codes: those of dream-run (0, 1, 2, 75); 1 when every push attempt was rejected; 143 when
# stopped by SIGTERM (what was committed before is pushed first).
set -euo pipefail

GIT_DIR_PATH="${DREAM_GIT_DIR:-/workspace/repo}"
BRANCH="${DREAM_GIT_BRANCH:-main}"
PUSH_BRANCH="${DREAM_PUSH_BRANCH:-$BRANCH}"
ATTEMPTS="${DREAM_GIT_ATTEMPTS:-3}"
PUSH_EVERY="${DREAM_GIT_PUSH_EVERY:-1}"
DREAM_RUN="${DREAM_RUN:-dream-run}"

# The token lives in this shell's unexported variable from here on.
token="${GIT_TOKEN:-}"
if [ -n "${DREAM_GIT_TOKEN_FILE:-}" ]; then
  token="$(cat "$DREAM_GIT_TOKEN_FILE")"
fi
unset GIT_TOKEN DREAM_GIT_TOKEN_FILE

say() { printf 'dream-git-sync: %s\n' "$*" >&2; }

git_() {
  # The token, when set, is in the environment of this git process only, read by the helper at
  # the moment git asks for it.
  if [ -n "$token" ]; then
    GIT_TOKEN="$token" git -c credential.helper= \
      -c 'credential.helper=!f() { test "$1" = get && echo username=x-access-token && echo "password=${GIT_TOKEN}"; }; f' \
      "$@"
  else
    git "$@"
  fi
}

cmd_clone() {
  : "${DREAM_GIT_URL:?set DREAM_GIT_URL to the repository to clone}"
  if [ -d "$GIT_DIR_PATH/.git" ]; then
    say "$GIT_DIR_PATH is already a clone; fetching $BRANCH"
    git_ -C "$GIT_DIR_PATH" fetch --quiet origin "$BRANCH"
    git -C "$GIT_DIR_PATH" checkout --quiet -B "$BRANCH" "origin/$BRANCH"
    return 0
  fi
  say "cloning branch $BRANCH into $GIT_DIR_PATH"
  git_ clone --quiet --branch "$BRANCH" --single-branch "$DREAM_GIT_URL" "$GIT_DIR_PATH"
}

dream_pid=""
stopping=0
pushed_head=""

# push: 0 pushed (or nothing to push), 1 rejected.
push() {
  local head
  head="$(git rev-parse HEAD)"
  [ "$head" = "$pushed_head" ] && return 0
  if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
    # A review branch belongs to this job: it is replaced by the rebuilt one.
    git_ push --quiet --force origin "HEAD:refs/heads/$PUSH_BRANCH" || return 1
  else
    git_ push --quiet origin "HEAD:refs/heads/$BRANCH" || return 1
  fi
  pushed_head="$head"
  say "pushed $(git rev-parse --short HEAD) to $PUSH_BRANCH"
}

on_term() {
  stopping=1
  if [ -n "$dream_pid" ]; then
    kill -TERM "$dream_pid" 2>/dev/null || true
  fi
}

# One chunk: dream-run for at most PUSH_EVERY batches; sets chunk_rc.
run_chunk() {
  set +e
  "$DREAM_RUN" "$@" &
  dream_pid=$!
  wait "$dream_pid"
  chunk_rc=$?
  # A trapped SIGTERM ends `wait` early: wait for Dream itself to be gone.
  while kill -0 "$dream_pid" 2>/dev/null; do wait "$dream_pid"; chunk_rc=$?; done
  dream_pid=""
  set -e
}

cmd_run() {
  cd "$GIT_DIR_PATH"
  export DREAM_WORKSPACE="${DREAM_WORKSPACE:-$GIT_DIR_PATH}"
  local attempt=1 before chunk=0 extra=()
  trap on_term TERM INT
  if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
    extra=(--branch "$PUSH_BRANCH")
  fi
  start_over() {
    # Every attempt starts from the remote's head of BRANCH; a review branch is rebuilt from it.
    git checkout --quiet -B "$BRANCH" "origin/$BRANCH"
    if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
      git branch --quiet -D "$PUSH_BRANCH" 2>/dev/null || true
    fi
    pushed_head="$(git rev-parse HEAD)"
  }
  start_over
  while :; do
    chunk=$((chunk + 1))
    before="$(git rev-parse HEAD)"
    say "attempt $attempt/$ATTEMPTS, chunk $chunk: $DREAM_RUN --max-batches $PUSH_EVERY ${extra[*]} $* on $(git rev-parse --short HEAD)"
    run_chunk --max-batches "$PUSH_EVERY" "${extra[@]}" "$@"
    if [ "$stopping" = 1 ]; then
      say "stopped (SIGTERM); pushing what was committed"
      push || say "the push was rejected; the next run redoes these batches"
      return 143
    fi
    if [ "$chunk_rc" -ne 0 ]; then
      if [ "$(git rev-parse HEAD)" = "$pushed_head" ]; then
        say "$DREAM_RUN exited $chunk_rc; nothing is pushed"
      elif push; then
        say "$DREAM_RUN exited $chunk_rc; the batches it committed before are pushed"
      else
        say "$DREAM_RUN exited $chunk_rc; the push was rejected, the next run redoes these batches"
      fi
      return "$chunk_rc"
    fi
    if [ "$(git rev-parse HEAD)" = "$before" ]; then
      say "no new commit; done"
      return 0
    fi
    if push; then
      attempt=1
      continue
    fi
    if [ "$attempt" -ge "$ATTEMPTS" ]; then
      say "giving up after $ATTEMPTS attempts; the next scheduled run will try again"
      return 1
    fi
    attempt=$((attempt + 1))
    say "push rejected (the remote moved?); fetching and running Dream again on the new head"
    git_ fetch --quiet origin "+refs/heads/$BRANCH:refs/remotes/origin/$BRANCH"
    git reset --quiet --hard
    start_over
  done
}

case "${1:-}" in
  clone) shift; cmd_clone "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) echo "usage: dream-git-sync clone | run [dream-run arguments]" >&2; exit 2 ;;
esac
