#!/usr/bin/env bash
# The shipped example workflows, unmodified, run by act as an operator's repository would run them
# on a schedule, against a local bare repository playing GitHub:
#   - docs/examples/dream-pr.yml, four scheduled runs: (1) batch 1 lands and batch 2 (a SOUL.md
#     change, holdSoulChanges) is held: the hold record reaches the remote's dream/memory and the
#     pull request's body lists it; (2) nothing new: 0 model requests; (3) the agent pushed entry
#     3: only that batch is dreamt, on top of the branch; (4) after the reviewer merged, nothing
#     new: 0 model requests and the branch is deleted (the pull request closed). The workflow's
#     own step pushes dream/memory with a lease against the tip its checkout saw (its absence in
#     run 1), and deletes it in run 4; create-pull-request then finds the branch equal to the
#     checkout and pushes nothing (tests/deploy/test_review_pr_lease.py proves the refusal when a
#     reviewer pushed meanwhile);
#   - docs/examples/dream-direct.yml on a schedule event: Dream's commit reaches the default branch.
# Schedule events are given as GitHub sends them, with no repository.default_branch (act would
# otherwise invent "master"). Model requests are counted at the scripted server. The pinned
# remote actions are replaced by local stand-ins (ci/docker/act/stand-ins/; act --local-repository),
# and the dream-memory action by this checkout's action.yml.
# Needs a running private dockerd, the base image and the image; builds the runner image with the
# image's venv in it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
PY="$REPO_ROOT/.venv/bin/python"
DREAM="$REPO_ROOT/.venv/bin/dream"
tools_venv

work="$(mktemp -d "${TMPDIR:-/tmp}/dream-act-flows.XXXXXX")"
server_pid=""
cleanup() {
  local ids
  ids="$("$DOCKER" ps -aq --filter name=act- 2>/dev/null || true)"
  [ -n "$ids" ] && "$DOCKER" rm -f $ids >/dev/null 2>&1
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
results="$DREAM_CI_ROOT/act-workflows.md"
: >"$results"
record() { printf '%s\n' "$*" | tee -a "$results"; }

t0=$(date +%s)
DOCKER_BUILDKIT=1 "$DOCKER" build --network host --build-arg "BASE_IMAGE=$(base_image_name)" \
  --build-arg "DREAM_IMAGE=$IMAGE" --target runner-venv -t "$RUNNER_IMAGE-venv" -f ci/docker/runner.Dockerfile \
  ci/docker >"$work/runner-build.log" 2>&1 || { tail -n 30 "$work/runner-build.log" >&2; die "building the runner image failed"; }
log "runner image $RUNNER_IMAGE-venv (the image's venv ready for the action) built in $(( $(date +%s) - t0 )) s"
start_scripted_server "$work"
requests() { [ -s "$work/requests.jsonl" ] && wc -l <"$work/requests.jsonl" || echo 0; }

# ---- the operator's repository on the "remote" ---------------------------------------------------
remote="$work/remote.git"
git init -q --bare -b main "$remote"
seed="$work/seed"
git clone -q "$remote" "$seed" 2>/dev/null
"$DREAM" init --workspace "$seed" >/dev/null
cat >"$seed/dream.json" <<JSON
{
  "modelPresets": {
    "scripted": {"model": "openai/scripted", "apiBase": "http://127.0.0.1:$port/v1", "apiKeyEnv": "DREAM_API_KEY", "maxRetries": 0}
  },
  "agents": {"defaults": {"dream": {"holdSoulChanges": true, "maxBatchSize": 1}}}
}
JSON
"$DREAM" append --workspace "$seed" --session-key cli:direct "- [durable] User fact number 1: prefers option 1 for setting 1." >/dev/null
"$DREAM" append --workspace "$seed" --session-key cli:direct "- [soul] Speak in a calm and concise voice." >/dev/null
mkdir -p "$seed/.github/workflows"
cp docs/examples/dream-pr.yml "$seed/.github/workflows/dream.yml"
cp docs/examples/dream-direct.yml "$seed/.github/workflows/dream-direct.yml"
g() { git -c user.name=agent -c user.email=agent@localhost "$@"; }
g -C "$seed" add -A
g -C "$seed" commit -q -m "agent: workspace, history and the Dream workflows"
g -C "$seed" push -q origin HEAD:refs/heads/main

# The action as a release would ship it (act copies the folder into the job container).
action="$work/action"
mkdir -p "$action/deploy"
cp -r action.yml pyproject.toml README.md src "$action/"
cp -r deploy/github-action "$action/deploy/"
standins="$REPO_ROOT/ci/docker/act/stand-ins"
pin() { sed -n "s|.*uses: \($1@[0-9a-f]\{40\}\).*|\1|p" docs/examples/dream-pr.yml | head -n1; }
checkout_pin="$(pin actions/checkout)"
cpr_pin="$(pin peter-evans/create-pull-request)"
dream_ref="$(sed -n 's|.*uses: \(dream-memory/dream-memory@[^ ]*\).*|\1|p' docs/examples/dream-pr.yml | head -n1)"
[ -n "$checkout_pin" ] && [ -n "$cpr_pin" ] && [ -n "$dream_ref" ] || die "could not read the pinned actions"
printf '{"schedule": "0 */2 * * *", "repository": {"default_branch": null}}\n' >"$work/schedule.json"
mkdir -p "$work/home"
printf -- '-P ubuntu-latest=%s\n' "$RUNNER_IMAGE-venv" >"$work/home/.actrc"

# act_schedule NAME WORKFLOW: one scheduled run in a fresh clone of the remote (act's workdir).
act_schedule() {
  local name="$1" workflow="$2" rc before t0
  rm -rf "$work/clone-$name"
  git clone -q "$remote" "$work/clone-$name" 2>/dev/null
  before=$(requests)
  t0=$(date +%s)
  set +e
  (cd "$work/clone-$name" && HOME="$work/home" "$TOOLS_VENV/bin/act" schedule \
    -W ".github/workflows/$workflow" -e "$work/schedule.json" \
    -P "ubuntu-latest=$RUNNER_IMAGE-venv" --pull=false --network host --container-daemon-socket - --rm \
    --no-skip-checkout \
    --local-repository "$checkout_pin=$standins/checkout" \
    --local-repository "$cpr_pin=$standins/create-pull-request" \
    --local-repository "$dream_ref=$action" \
    --container-options "-v $work:$work" \
    --env "FAKE_GITHUB_REMOTE=$remote" --env "FAKE_GITHUB_PULLS=$work/pulls.json" \
    --var DREAM_MODEL=scripted -s DREAM_API_KEY=dummy-key-for-the-scripted-server \
    >"$work/$name.log" 2>&1)
  rc=$?
  set -e
  cp "$work/$name.log" "$DREAM_CI_ROOT/act-$name.log"
  if [ "$rc" -ne 0 ] || ! grep -q "Job succeeded" "$work/$name.log"; then
    tail -n 60 "$work/$name.log" >&2
    die "act run $name ($workflow) failed (exit $rc; log in $DREAM_CI_ROOT/act-$name.log)"
  fi
  grep -q "dummy-key-for-the-scripted-server" "$work/$name.log" && die "the API key appeared in the $name log"
  made=$(( $(requests) - before ))
  secs=$(( $(date +%s) - t0 ))
}
branch_file() { git --git-dir "$remote" show "refs/heads/dream/memory:$1" 2>/dev/null; }
pr_body() { "$PY" -c 'import json,sys; p=[p for p in json.load(open(sys.argv[1]))["pulls"] if p["head"]=="dream/memory"]; print(p[-1]["body"] if p else ""); print("STATE", p[-1]["state"] if p else "none")' "$work/pulls.json"; }

# ---- dream-pr.yml -------------------------------------------------------------------------------
act_schedule pr1 dream.yml
held_id=$(git --git-dir "$remote" ls-tree --name-only "refs/heads/dream/memory" memory/.dream_held/ 2>/dev/null | head -n1 | xargs -r basename)
[ -n "$held_id" ] || die "run 1: no hold record on the remote's dream/memory"
branch_file "memory/.dream_held/$held_id/change.json" >/dev/null || die "run 1: change.json missing"
[ "$(branch_file memory/.dream_cursor)" = 2 ] || die "run 1: the cursor past the held batch did not travel"
pr_body >"$work/body1.md"
grep -q "STATE open" "$work/body1.md" || die "run 1: no open pull request"
grep -q "\`$held_id\` (this run)" "$work/body1.md" || die "run 1: the pull request body does not list the hold"
grep -q "Summary - .*| held for review | 1 (1 held by this run) |" "$work/pr1.log" \
  || grep -q "| held for review | 1 (1 held by this run) |" "$work/pr1.log" || die "run 1: the step summary does not count the hold"
# #19: every line the branch adds to a memory file is in the body with its source entries, and
# every Dream commit of the branch that changed a memory file has its provenance note on the
# remote (refs/notes/dream); a batch held whole committed only its hold record, so it has none.
git --git-dir "$remote" diff main dream/memory -- '*.md' ':!memory/.dream_held' >"$work/diff1.txt"
sourced=$("$PY" - "$work/diff1.txt" "$work/body1.md" <<'PY'
import sys
diff, body = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
added = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++") and ln[1:].strip()]
missing = [t for t in added if not any(f"+ `{t}` ← entry " in b for b in body.splitlines())]
if not added or missing:
    sys.exit(f"run 1: {len(missing)} of {len(added)} added line(s) without sources in the pull request body: {missing}")
print(len(added))
PY
) || die "run 1: the pull request body does not show sources for every added line"
noted=0
for sha in $(git --git-dir "$remote" log --format='%H %s' main..dream/memory -- '*.md' ':!memory/.dream_held' \
    | sed -n 's/^\([0-9a-f]*\) dream: .*/\1/p'); do
  git --git-dir "$remote" notes --ref dream show "$sha" >/dev/null 2>&1 || die "run 1: commit $sha has no provenance note on the remote"
  noted=$((noted + 1))
done
[ "$noted" -gt 0 ] || die "run 1: no Dream commit on dream/memory changed a memory file"
grep -q "dream/memory is at .*(leased against its absence)" "$work/pr1.log" \
  || die "run 1: the workflow did not push dream/memory with a lease against its absence"
record "- dream-pr.yml run 1 (schedule): $made model requests, ${secs} s; batch 1 committed, batch 2 held as \`$held_id\`: the hold record and cursor 2 are on the remote's dream/memory, the open pull request's body lists the hold and shows sources for all $sourced added line(s), the $noted Dream commit(s) that changed memory have their notes on the remote, the step summary says \"held for review | 1\""

act_schedule pr2 dream.yml
[ "$made" -eq 0 ] || die "run 2 (open PR, no new history) made $made model requests; expected 0"
grep -q "continuing from dream/memory" "$work/pr2.log" || die "run 2 did not continue from dream/memory"
pr_body >"$work/body2.md"
grep -q "\`$held_id\` cursors" "$work/body2.md" || die "run 2: the pull request body no longer lists the hold"
record "- run 2 (open pull request, nothing new): **0 model requests** (${secs} s); Dream continued from dream/memory's cursor; the body still lists \`$held_id\`"

agent="$work/agent"
git clone -q "$remote" "$agent" 2>/dev/null
"$DREAM" append --workspace "$agent" --session-key cli:direct "- [durable] User fact number 3: prefers option 3 for setting 3." >/dev/null
g -C "$agent" add memory/history.jsonl memory/.cursor
g -C "$agent" commit -q -m "agent: history 3"
g -C "$agent" push -q origin HEAD:refs/heads/main
act_schedule pr3 dream.yml
[ "$made" -gt 0 ] || die "run 3 made no model request for the new entry"
[ "$(branch_file memory/.dream_cursor)" = 3 ] || die "run 3: dream/memory's cursor is not 3"
ahead=$(git --git-dir "$remote" rev-list --count main..dream/memory)
[ "$ahead" -eq 3 ] || die "run 3: dream/memory is $ahead commits ahead of main; expected 3 (batch 1, the hold, batch 3)"
grep -q "dream/memory is at .*(leased against [0-9a-f]\{40\})" "$work/pr3.log" \
  || die "run 3: the workflow did not push the rebased dream/memory with a lease against the tip its checkout saw"
grep -q "create-pull-request (stand-in): not-updated pull request" "$work/pr3.log" \
  || die "run 3: create-pull-request did not find dream/memory already pushed"
record "- run 3 (the agent pushed entry 3 to main): $made model requests, for that entry only (${secs} s); dream/memory = main + 3 commits, cursor 3"

# The reviewer merges the pull request (a merge commit; the branch is left, as without auto-delete).
git -C "$agent" fetch -q origin
g -C "$agent" merge -q --no-ff -m "Merge pull request #1 from dream/memory" origin/dream/memory
g -C "$agent" push -q origin HEAD:refs/heads/main
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); [p.update(state="merged") for p in d["pulls"] if p["state"]=="open"]; json.dump(d, open(sys.argv[1],"w"))' "$work/pulls.json"
act_schedule pr4 dream.yml
[ "$made" -eq 0 ] || die "run 4 (merged, nothing new) made $made model requests; expected 0"
git --git-dir "$remote" rev-parse -q --verify refs/heads/dream/memory >/dev/null && die "run 4: dream/memory is still on the remote after the merge"
grep -q "dream/memory deleted: nothing on it beyond main (leased against" "$work/pr4.log" \
  || die "run 4: dream/memory was not deleted by the workflow's leased step"
record "- run 4 (after the merge, nothing new): **0 model requests**, dream/memory deleted from the remote (${secs} s)"

# ---- dream-direct.yml on a schedule event --------------------------------------------------------
git -C "$agent" pull -q --ff-only origin main
"$DREAM" append --workspace "$agent" --session-key cli:direct "- [durable] User fact number 4: prefers option 4 for setting 4." >/dev/null
g -C "$agent" add memory/history.jsonl memory/.cursor
g -C "$agent" commit -q -m "agent: history 4"
g -C "$agent" push -q origin HEAD:refs/heads/main
act_schedule direct dream-direct.yml
subject=$(git --git-dir "$remote" log -1 --format=%s main)
case "$subject" in dream:*) ;; *) die "dream-direct on a schedule: main ends with \"$subject\", not Dream's commit";; esac
[ "$(git --git-dir "$remote" show main:memory/.dream_cursor)" = 4 ] || die "dream-direct: main's cursor is not 4"
record "- dream-direct.yml (schedule event, no repository.default_branch in the payload): $made model requests, Dream's commit pushed to main: \"$subject\" (${secs} s)"
record "- scripted LLM server received $(requests) requests in all"
log "the example workflows passed under act"
