#!/usr/bin/env bash
# dream-git-sync: Dream on a git clone, for Kubernetes (deploy/kubernetes/cronjob-git.yaml).
#
#   dream-git-sync clone   init container: clone DREAM_GIT_URL (branch DREAM_GIT_BRANCH) into
#                          DREAM_GIT_DIR
#   dream-git-sync run     main container: run dream-run in that clone and push the result back.
#                          If the remote moved meanwhile (push rejected), fetch, reset to the new
#                          head and run Dream again (a run is idempotent: the cursor lives in the
#                          repository), at most DREAM_GIT_ATTEMPTS times.
#
# Environment:
#   DREAM_GIT_URL        repository to clone (https://... or a path); required for `clone`
#   DREAM_GIT_BRANCH     branch to clone and build on (default: main)
#   DREAM_PUSH_BRANCH    branch to push to (default: DREAM_GIT_BRANCH). When it differs, it is a
#                        review branch rebuilt from DREAM_GIT_BRANCH on every run
#                        (`dream-run --branch`) and force-pushed: open a pull request from it.
#   DREAM_GIT_DIR        where the clone lives (default: /workspace/repo)
#   DREAM_WORKSPACE      the Dream workspace inside the clone (default: DREAM_GIT_DIR)
#   DREAM_GIT_ATTEMPTS   run+push attempts when the remote moves (default: 3)
#   GIT_TOKEN            optional HTTPS token (from a Secret); sent through a credential helper,
#                        never written to disk or to the remote URL
#   DREAM_RUN            the Dream command (default: dream-run); extra arguments after `run` are
#                        passed to it
# Exit codes: those of dream-run (0, 1, 2, 75); 1 when every push attempt was rejected.
set -euo pipefail

GIT_DIR_PATH="${DREAM_GIT_DIR:-/workspace/repo}"
BRANCH="${DREAM_GIT_BRANCH:-main}"
PUSH_BRANCH="${DREAM_PUSH_BRANCH:-$BRANCH}"
ATTEMPTS="${DREAM_GIT_ATTEMPTS:-3}"
DREAM_RUN="${DREAM_RUN:-dream-run}"

say() { printf 'dream-git-sync: %s\n' "$*" >&2; }

git_() {
  # The token, when set, comes from the environment at the moment git asks for it.
  if [ -n "${GIT_TOKEN:-}" ]; then
    git -c credential.helper= \
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

cmd_run() {
  cd "$GIT_DIR_PATH"
  export DREAM_WORKSPACE="${DREAM_WORKSPACE:-$GIT_DIR_PATH}"
  local attempt rc before extra=()
  if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
    extra=(--branch "$PUSH_BRANCH")
  fi
  for attempt in $(seq 1 "$ATTEMPTS"); do
    # Start every attempt from the remote's head of BRANCH; a review branch is rebuilt from it.
    git checkout --quiet -B "$BRANCH" "origin/$BRANCH"
    if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
      git branch --quiet -D "$PUSH_BRANCH" 2>/dev/null || true
    fi
    before="$(git rev-parse HEAD)"
    say "attempt $attempt/$ATTEMPTS: $DREAM_RUN ${extra[*]} $* on $(git rev-parse --short HEAD)"
    set +e
    "$DREAM_RUN" "${extra[@]}" "$@"
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
      say "$DREAM_RUN exited $rc; nothing is pushed"
      return "$rc"
    fi
    if [ "$(git rev-parse HEAD)" = "$before" ]; then
      say "no new commit; nothing to push"
      return 0
    fi
    if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
      # A review branch belongs to this job: it is replaced by the rebuilt one.
      if git_ push --quiet --force origin "HEAD:refs/heads/$PUSH_BRANCH"; then
        say "pushed $(git rev-parse --short HEAD) to $PUSH_BRANCH (rebuilt from $BRANCH)"
        return 0
      fi
    elif git_ push --quiet origin "HEAD:refs/heads/$BRANCH"; then
      say "pushed $(git rev-parse --short HEAD) to $BRANCH"
      return 0
    fi
    say "push rejected (the remote moved?); fetching and running Dream again on the new head"
    git_ fetch --quiet origin "+refs/heads/$BRANCH:refs/remotes/origin/$BRANCH"
    git reset --quiet --hard
  done
  say "giving up after $ATTEMPTS attempts; the next scheduled run will try again"
  return 1
}

case "${1:-}" in
  clone) shift; cmd_clone "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) echo "usage: dream-git-sync clone | run [dream-run arguments]" >&2; exit 2 ;;
esac
