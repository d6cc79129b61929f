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
#                         (`dream-run --branch`) and force-pushed with a lease: open a pull request
#                         from it. Only commits dream-run made are ever replaced: when the remote's
#                         branch holds any other commit (a reviewer's fixup, a `dream review`
#                         accept) that DREAM_GIT_BRANCH lacks, nothing is overwritten and the run
#                         exits 2 naming the branch, before Dream starts or after the rejected push.
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
# Exit codes: those of dream-run (0, 1, 2, 75); 1 when every push attempt was rejected (or the
# remote could not be read); 2 when the review branch holds commits not made by Dream, or the
# configuration is unusable (DREAM_GIT_URL unset, a count that is not a whole number from 1, `run`
# with no clone in DREAM_GIT_DIR): retrying would not help; 143 when
# stopped by SIGTERM (the step under way, a chunk or a push, is finished or abandoned, what was
# committed is pushed, and no further chunk starts).
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

# Bad configuration is exit 2, so the Job's podFailurePolicy ends it instead of retrying.
config_error() {
  say "$*"
  exit 2
}

# need_count NAME VALUE: VALUE is a whole number from 1 (a word would loop `[ -ge ]` without bound).
need_count() {
  case "$2" in
    "" | *[!0-9]* | ??????????*) ;;
    *) [ "$((10#$2))" -ge 1 ] && return 0 ;;
  esac
  config_error "$1 is ${2:-empty}: it must be a whole number from 1 (e.g. 3), or unset for the default"
}

git_() {
  # The token, when set, is in the environment of this git process only, read by the helper at
  # the moment git asks for it.
  if [ -n "$token" ]; then
    # shellcheck disable=SC2016  # ${GIT_TOKEN} is for the helper's shell, not this one
    GIT_TOKEN="$token" git -c credential.helper= \
      -c 'credential.helper=!f() { test "$1" = get && echo username=x-access-token && echo "password=${GIT_TOKEN}"; }; f' \
      "$@"
  else
    git "$@"
  fi
}

cmd_clone() {
  [ -n "${DREAM_GIT_URL:-}" ] ||
    config_error "DREAM_GIT_URL is not set: set it to the repository to clone (https://... or a path)"
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
# Review-branch mode: the remote's PUSH_BRANCH as last fetched or pushed (empty: absent). Every
# push is a compare-and-swap on it (--force-with-lease), so nothing pushed since is overwritten.
review_sha=""

# fetch_review: the remote's PUSH_BRANCH into origin/PUSH_BRANCH and review_sha; 1 on failure.
fetch_review() {
  local line
  line="$(git_ ls-remote origin "refs/heads/$PUSH_BRANCH")" || return 1
  if [ -z "$line" ]; then
    review_sha=""
    git update-ref -d "refs/remotes/origin/$PUSH_BRANCH" 2>/dev/null || true
    return 0
  fi
  git_ fetch --quiet origin "+refs/heads/$PUSH_BRANCH:refs/remotes/origin/$PUSH_BRANCH" || return 1
  review_sha="$(git rev-parse "refs/remotes/origin/$PUSH_BRANCH")"
}

# review_foreign: the commits of the remote's PUSH_BRANCH that rebuilding it would lose besides
# what dream-run itself commits (one parent and: subject "dream: " with a Dream-Range trailer,
# "dream: compact history (...)" or "memory: init"), one "<sha> <subject>" a line. A person's
# commit is foreign, `dream review` and `dream revert` commits included. Nothing when the branch
# is absent, merged into BRANCH, or its changes are all in BRANCH already (a squash or rebase merge).
review_foreign() {
  [ -n "$review_sha" ] || return 0
  local base="refs/remotes/origin/$BRANCH" log sha parents range subject foreign="" tree
  git merge-base --is-ancestor "$review_sha" "$base" && return 0
  if ! log="$(git log --format='%H%x1f%P%x1f%(trailers:key=Dream-Range,valueonly,separator=%x2C)%x1f%s' \
    "$base..$review_sha")"; then
    printf '%s\n' "${review_sha:0:7} (its commits cannot be listed)"
    return 0
  fi
  while IFS=$'\x1f' read -r sha parents range subject; do
    [ -n "$sha" ] || continue
    if [ "$parents" = "${parents%% *}" ]; then
      case "$subject" in
        "dream: apply held "* | "dream: discard held "* | "dream: reject held "* | "dream: revert "*) ;;
        "dream: compact history ("* | "memory: init") continue ;;
        "dream: "*) [ -z "$range" ] || continue ;;
      esac
    fi
    foreign+="$(git rev-parse --short "$sha") $subject"$'\n'
  done <<<"$log"
  [ -n "$foreign" ] || return 0
  # Merged in another shape: merging the branch into BRANCH would change nothing.
  if tree="$(git merge-tree --write-tree "$base" "$review_sha" 2>/dev/null)" &&
    [ "${tree%%$'\n'*}" = "$(git rev-parse "$base^{tree}")" ]; then
    return 0
  fi
  printf '%s' "$foreign"
}

# guard_review: fetch the review branch; 0 when this job may replace it, 2 (said why) when it holds
# someone else's commits, 1 when the remote cannot be read.
guard_review() {
  local foreign n
  if ! fetch_review; then
    say "cannot read $PUSH_BRANCH from the remote"
    return 1
  fi
  foreign="$(review_foreign)"
  [ -n "$foreign" ] || return 0
  n="$(printf '%s\n' "$foreign" | wc -l)"
  say "the remote's $PUSH_BRANCH holds $n commit(s) not made by Dream and not in $BRANCH (a reviewer's?):"
  printf '%s\n' "$foreign" | sed 's/^/    /' >&2
  say "not overwriting them: nothing is pushed, exit 2. To let Dream rebuild $PUSH_BRANCH from" \
    "$BRANCH again, merge the pull request from $PUSH_BRANCH into $BRANCH (any merge style), or" \
    "delete the branch to drop them (git push origin --delete $PUSH_BRANCH)"
  return 2
}

# push: 0 pushed (or nothing to push), 1 rejected.
push() {
  local head
  head="$(git rev-parse HEAD)"
  [ "$head" = "$pushed_head" ] && return 0
  if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
    # A review branch is replaced by the rebuilt one, but only if it is still what this run last
    # fetched or pushed (absent: must still be absent).
    if ! git_ push --quiet --force-with-lease="refs/heads/$PUSH_BRANCH:$review_sha" origin \
      "HEAD:refs/heads/$PUSH_BRANCH"; then
      say "push to $PUSH_BRANCH rejected: it is no longer at ${review_sha:-(absent)} (someone pushed to it?); not overwriting it"
      return 1
    fi
    review_sha="$head"
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
  # A SIGTERM that came between the fork and here found no pid to pass on.
  [ "$stopping" = 1 ] && kill -TERM "$dream_pid" 2>/dev/null
  wait "$dream_pid"
  chunk_rc=$?
  # A trapped SIGTERM ends `wait` early: wait for Dream itself to be gone.
  while kill -0 "$dream_pid" 2>/dev/null; do wait "$dream_pid"; chunk_rc=$?; done
  dream_pid=""
  set -e
}

cmd_run() {
  [ -d "$GIT_DIR_PATH/.git" ] ||
    config_error "$GIT_DIR_PATH holds no clone: run \`dream-git-sync clone\` before \`run\` (the init container" \
      "of cronjob-git.yaml), with the same DREAM_GIT_DIR and the same volume mounted there"
  cd "$GIT_DIR_PATH"
  export DREAM_WORKSPACE="${DREAM_WORKSPACE:-$GIT_DIR_PATH}"
  local attempt=1 before chunk=0 extra=() rc
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
  if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
    # Before Dream runs (and costs anything): is the review branch still this job's to replace?
    rc=0
    guard_review || rc=$?
    [ "$rc" = 0 ] || return "$rc"
  fi
  start_over
  while :; do
    if [ "$stopping" = 1 ]; then
      # SIGTERM came during a push, a fetch or a reset: start no further chunk.
      say "stopped (SIGTERM) before chunk $((chunk + 1)); pushing what was committed"
      push || say "the push was rejected; the next run redoes these batches"
      return 143
    fi
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
    if [ "$PUSH_BRANCH" != "$BRANCH" ]; then
      # Rejected by the lease: whose commits moved the review branch?
      rc=0
      guard_review || rc=$?
      [ "$rc" = 0 ] || return "$rc"
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

need_count DREAM_GIT_ATTEMPTS "$ATTEMPTS"
need_count DREAM_GIT_PUSH_EVERY "$PUSH_EVERY"

case "${1:-}" in
  clone) shift; cmd_clone "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) echo "usage: dream-git-sync clone | run [dream-run arguments]" >&2; exit 2 ;;
esac
