#!/usr/bin/env bash
# Build the image from the repo's Dockerfile and prove it on this machine:
#   - image size (a hard check: at most DREAM_IMAGE_MAX_MB, default 340), its layers; only runtime
#     files in it (no compiler, pip/setuptools/wheel, test folders, stubs; bytecode present, no
#     PYTHONDONTWRITEBYTECODE); cold start of `dream-run --help`: the first `docker run` after the
#     build, best of 5 warm beside `python3 -c pass` in the same image (reported, not gated), and
#     `docker start` of a created container, and the process alone inside it;
#   - `docker run --network host` against a mounted sample workspace with the scripted LLM server
#     (dream_memory.testing.llm_server --offline-engine) on the host: exit 0, report status ok with
#     commits, those commits in the mounted workspace's git log, files owned by the container user;
#     the same with `--user UID:GID` on a workspace owned by that uid;
#   - exit 75 while another process on the host holds memory/.dream.lock (flock);
#   - `--entrypoint dream-consolidate` and `--entrypoint dream-restore` reachable (--help);
#   - every provider dream-memory names loads in the slimmed venv (ci/docker/provider-smoke.py);
#   - `docker stop -t 10` while dream-run waits on the model returns well within its 10 s grace (tini), exit 143,
#     with the interrupted report on stdout;
#   - over a workspace owned by another uid: exit 2 at once, naming owner, uid and fixes; :ro too;
#   - an agent and Dream under different uids writing one folder through a shared group.
# The Kubernetes manifests are simulated by ci/docker/k8s-proof.sh.
# Needs a running private dockerd (dockerd-start.sh) and the base image (base-image.sh).
# Results (for docs/deploy-docker.md) go to $DREAM_CI_ROOT/container-proof.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
PY="$REPO_ROOT/.venv/bin/python"
[ -x "$PY" ] || die ".venv is missing: run scripts/test (or .ci/run) first"

work="$(mktemp -d "${TMPDIR:-/tmp}/dream-container.XXXXXX")"
server_pid=""
holder_pid=""
hang_pid=""
cleanup() {
  [ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null || true
  [ -n "$hang_pid" ] && kill "$hang_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
results="$DREAM_CI_ROOT/container-proof.md"
: >"$results"
record() { printf '%s\n' "$*" | tee -a "$results"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# ---- build ---------------------------------------------------------------------------------------
t0=$(now)
DOCKER_BUILDKIT=1 "$DOCKER" build --network host -t "$IMAGE" . >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log" >&2; die "docker build failed"; }
t1=$(now)
# Cold: the first container of the freshly built image (no earlier run has mounted its layers or
# loaded its files through the container); measured before anything else runs it.
load_cold=$(cut -d' ' -f1-3 /proc/loadavg)
t2=$(now); "$DOCKER" run --rm --network host "$IMAGE" --help >"$work/help.txt"; t3=$(now)
cold_s=$(elapsed "$t2" "$t3")
size_bytes=$("$DOCKER" image inspect --format '{{.Size}}' "$IMAGE")
base_bytes=$("$DOCKER" image inspect --format '{{.Size}}' "$(base_image_name)")
record "- build: $(elapsed "$t0" "$t1") s (docker build --network host, BuildKit, storage $("$DOCKER" info --format '{{.Driver}}'))"
record "- image size: $(( size_bytes / 1000000 )) MB ($size_bytes bytes; base image $(( base_bytes / 1000000 )) MB)"
# The size is deterministic for a build, so it is a hard check, under a generous ceiling above the
# 300 MB goal (docs/deploy-docker.md): a dependency that doubles the image fails here.
size_ceiling_mb=${DREAM_IMAGE_MAX_MB:-340}
[ $(( size_bytes / 1000000 )) -le "$size_ceiling_mb" ] \
  || die "the image is $(( size_bytes / 1000000 )) MB, over the $size_ceiling_mb MB ceiling"
user_line=$("$DOCKER" image inspect --format 'user={{.Config.User}} entrypoint={{json .Config.Entrypoint}} workdir={{.Config.WorkingDir}}' "$IMAGE")
record "- image config: $user_line"
# What each layer weighs (docs/deploy-docker.md), and the venv's largest packages.
record "- layers (docker history, newest first; empty metadata layers left out):"
"$DOCKER" history --no-trunc --format '{{.Size}}|{{.CreatedBy}}' "$IMAGE" | awk -F'|' '$1 != "0B" {
  cmd = $2; gsub(/[[:space:]]+/, " ", cmd); sub(/^\/bin\/sh -c /, "", cmd); sub(/ # buildkit$/, "", cmd)
  if (cmd == "") cmd = "(the base image)"
  printf "  - %s: %s\n", $1, substr(cmd, 1, 90) }' | tee -a "$results"
"$DOCKER" run --rm --entrypoint /bin/sh "$IMAGE" -c \
  'cd /opt/dream/lib/python3*/site-packages && du -sk -- * | sort -rn | head -n 8' \
  | awk '{ printf "%s %.1f MB", (NR == 1 ? "  - in the venv:" : ","), $1 / 1024; printf " %s", $2 } END { print "" }' \
  | tee -a "$results"
"$DOCKER" image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" >"$work/env.txt"
grep -qx 'DREAM_WORKSPACE=/workspace' "$work/env.txt" || die "DREAM_WORKSPACE=/workspace is not set in the image"
grep -qx 'LITELLM_LOCAL_MODEL_COST_MAP=True' "$work/env.txt" || die "LITELLM_LOCAL_MODEL_COST_MAP=True is not set"
if grep -Eiq '(KEY|TOKEN|SECRET|PASSWORD)=' "$work/env.txt"; then die "the image environment holds a secret-like variable"; fi
[ "$("$DOCKER" run --rm --entrypoint id "$IMAGE" -u)" = 10001 ] || die "the image does not run as uid 10001"
# Only runtime files: no compiler, no pip/setuptools/wheel, no test folders or stubs of the
# dependencies, and bytecode present (compiled at build time, never written at run time).
"$DOCKER" run --rm --entrypoint /bin/sh "$IMAGE" -c '
  sp=$(echo /opt/dream/lib/python3*/site-packages)
  for tool in gcc cc c++ make strip ld; do command -v "$tool" >/dev/null && echo "compiler/build tool: $tool"; done
  for d in pip setuptools wheel; do [ -e "$sp/$d" ] && echo "packaging tool in the venv: $d"; done
  find "$sp" -mindepth 2 -type d \( -name tests -o -name test \) -print | head -n 3 | sed "s/^/test folder: /"
  find "$sp" -name "*.pyi" -print | head -n 3 | sed "s/^/type stub: /"
  [ -n "$(find "$sp/dream_memory" -name "*.pyc" -print -quit)" ] || echo "no bytecode for dream_memory"
  printf "%s pyc, %s py\n" "$(find "$sp" -name "*.pyc" | wc -l)" "$(find "$sp" -name "*.py" | wc -l)" >&2
' >"$work/leftovers.txt" 2>"$work/pyc-count.txt"
[ ! -s "$work/leftovers.txt" ] || { cat "$work/leftovers.txt" >&2; die "the image holds build or test leftovers"; }
if grep -q '^PYTHONDONTWRITEBYTECODE=' "$work/env.txt"; then die "PYTHONDONTWRITEBYTECODE is set (the bytecode is compiled at build time)"; fi
record "- only runtime files: no compiler, pip, setuptools, wheel, test folders or stubs in the venv; bytecode: $(cat "$work/pyc-count.txt") (site-packages)"

# ---- cold start (5 times each; min / median / max) ----------------------------------------------
stats() { sort -n | awk '{ v[NR] = $1 } END { printf "%.2f / %.2f / %.2f s", v[1], v[int((NR + 1) / 2)], v[NR] }'; }
: >"$work/run.t"; : >"$work/start.t"; : >"$work/proc.t"
for _ in 1 2 3 4 5; do
  t0=$(now); "$DOCKER" run --rm --network host "$IMAGE" --help >"$work/help.txt"; t1=$(now)
  elapsed "$t0" "$t1" >>"$work/run.t"; echo >>"$work/run.t"
  cid=$("$DOCKER" create --network host "$IMAGE" --help)
  t0=$(now); "$DOCKER" start -a "$cid" >/dev/null; t1=$(now)
  "$DOCKER" rm "$cid" >/dev/null
  elapsed "$t0" "$t1" >>"$work/start.t"; echo >>"$work/start.t"
  "$DOCKER" run --rm --network host --read-only --entrypoint python3 "$IMAGE" -c '
import subprocess, time
t = time.perf_counter()
subprocess.run(["dream-run", "--help"], stdout=subprocess.DEVNULL, check=True)
print(f"{time.perf_counter() - t:.3f}")' >>"$work/proc.t"
done
grep -q "Usage: dream-run" "$work/help.txt" || die "dream-run --help printed no usage"
# The comparator, side by side: the same docker run of the same image with `python3 -c pass`.
: >"$work/pass.t"; : >"$work/proc-pass.t"
for _ in 1 2 3 4 5; do
  t0=$(now); "$DOCKER" run --rm --network host --entrypoint python3 "$IMAGE" -c pass; t1=$(now)
  elapsed "$t0" "$t1" >>"$work/pass.t"; echo >>"$work/pass.t"
done
"$DOCKER" run --rm --network host --read-only --entrypoint python3 "$IMAGE" -c '
import subprocess, time
for _ in range(5):
    t = time.perf_counter()
    subprocess.run(["python3", "-c", "pass"], check=True)
    print(f"{time.perf_counter() - t:.3f}")' >"$work/proc-pass.t"
best() { sort -n | head -n1 | awk '{ printf "%.2f s", $1 }'; }
# Reported, not gated: wall-clock figures on a shared 2-core machine.
record "- docker run --rm IMAGE --help: cold (the first run after the build) $cold_s s (load $load_cold); warm best of 5 $(best <"$work/run.t") (load $(cut -d' ' -f1-3 /proc/loadavg)); goal <= 0.5 s cold"
record "  - comparator, docker run --rm --entrypoint python3 IMAGE -c pass: best of 5 $(best <"$work/pass.t")"
record "  - inside the container: dream-run --help best of 5 $(best <"$work/proc.t"), python3 -c pass best of 5 $(best <"$work/proc-pass.t")"
record "- cold start of dream-run --help, min / median / max of 5:"
record "  - docker run --rm IMAGE --help (create, start, exit, remove): $(stats <"$work/run.t")"
record "  - docker start -a of an already created container: $(stats <"$work/start.t")"
record "  - the dream-run --help process inside the container: $(stats <"$work/proc.t")"

# ---- sample workspace and the scripted LLM server on the host network ----------------------------
make_workspace() {  # make_workspace DIR OWNER
  local ws="$1"
  "$REPO_ROOT/.venv/bin/dream" init --workspace "$ws" >/dev/null
  for text in "User prefers dark mode in every editor" "User's name is Alice" \
    "The project deploys with Kubernetes CronJobs" "Alice reviews memory changes as pull requests"; do
    "$REPO_ROOT/.venv/bin/dream" append --workspace "$ws" --session-key cli:direct "$text" >/dev/null
  done
  chown -R "$2" "$ws"
}
start_scripted_server "$work"
llm_env=(-e DREAM_MODEL=openai/scripted -e "DREAM_API_BASE=http://127.0.0.1:$port/v1" -e DREAM_API_KEY=dummy)

check_run() {  # check_run WS OWNER REPORT RC
  local ws="$1" owner="$2" report="$3" rc="$4"
  [ "$rc" -eq 0 ] || die "docker run exited $rc (expected 0)"
  "$PY" - "$report" "$ws" <<'PYEOF' || die "report check failed"
import json, subprocess, sys
report = json.load(open(sys.argv[1]))
assert report["status"] == "ok", report["status"]
assert report["workspace"] == "/workspace", report["workspace"]
assert report["commits"] and all(len(c) == 40 for c in report["commits"]), report["commits"]
assert report["entries_processed"] == 4, report["entries_processed"]
log = subprocess.run(["git", "-c", "safe.directory=*", "-C", sys.argv[2], "log", "--format=%H %s"],
                     capture_output=True, text=True, check=True).stdout
shas = [line.split()[0] for line in log.splitlines()]
for sha in report["commits"]:
    assert sha in shas, f"{sha} not in the mounted workspace's git log"
print(f"  report: status {report['status']}, {len(report['commits'])} commit(s), "
      f"cursor {report['cursor_before']} -> {report['cursor_after']}, changed {report['changed']}")
PYEOF
  bad=$(find "$ws" -path "$ws/.git" -prune -o ! -user "${owner%%:*}" -print | head -n 5)
  [ -z "$bad" ] || die "files in the mount not owned by ${owner%%:*}: $bad"
}

# 1) the image's own user (10001) on a workspace owned by 10001
ws1="$work/ws-default"
make_workspace "$ws1" 10001:10001
set +e
"$DOCKER" run --rm --network host --read-only --tmpfs /tmp -v "$ws1:/workspace" "${llm_env[@]}" \
  "$IMAGE" >"$work/report1.json" 2>"$work/run1.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || cat "$work/run1.err" >&2
record "- docker run --read-only (user 10001) on a mounted workspace: exit $rc"
check_run "$ws1" 10001 "$work/report1.json" "$rc" | tee -a "$results"
git -c safe.directory='*' -C "$ws1" log --format='  %h %s' | tee -a "$results"
cp "$work/report1.json" "$DREAM_CI_ROOT/container-report.json"
[ -s "$work/requests.jsonl" ] || die "the scripted server recorded no request"

# 2) --user UID:GID on a workspace owned by that host user
ws2="$work/ws-user"
make_workspace "$ws2" 4242:4242
set +e
"$DOCKER" run --rm --network host --read-only --tmpfs /tmp --user 4242:4242 -v "$ws2:/workspace" \
  "${llm_env[@]}" "$IMAGE" >"$work/report2.json" 2>"$work/run2.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || cat "$work/run2.err" >&2
record "- docker run --user 4242:4242 on a workspace owned by 4242: exit $rc"
check_run "$ws2" 4242 "$work/report2.json" "$rc" | tee -a "$results"

# 3) exit 75 while another process on the host holds the workspace lock
"$REPO_ROOT/.venv/bin/dream" append --workspace "$ws1" "User switched to a light theme" >/dev/null
chown -R 10001:10001 "$ws1"
flock "$ws1/memory/.dream.lock" sleep 120 &
holder_pid=$!
for _ in $(seq 1 50); do
  flock -n "$ws1/memory/.dream.lock" true 2>/dev/null || break
  sleep 0.1
done
set +e
"$DOCKER" run --rm --network host --read-only --tmpfs /tmp -v "$ws1:/workspace" "${llm_env[@]}" \
  "$IMAGE" >"$work/report3.json" 2>"$work/run3.err"
rc=$?
set -e
kill "$holder_pid" 2>/dev/null; wait "$holder_pid" 2>/dev/null || true; holder_pid=""
record "- docker run while \`flock memory/.dream.lock\` is held on the host: exit $rc ($(head -n1 "$work/run3.err"))"
[ "$rc" -eq 75 ] || { cat "$work/run3.err" >&2; die "expected exit 75 while the lock is held, got $rc"; }
pending=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pending"])' \
  <("$REPO_ROOT/.venv/bin/dream" status --json --workspace "$ws1" 2>/dev/null) 2>/dev/null || echo "?")
record "  (nothing was done: $pending entry still pending)"

# 4) the companion entrypoints
for ep in dream-consolidate dream-restore; do
  "$DOCKER" run --rm --network host --entrypoint "$ep" "$IMAGE" --help >"$work/$ep.txt"
  grep -q "Usage: $ep" "$work/$ep.txt" || die "--entrypoint $ep --help printed no usage"
  record "- docker run --entrypoint $ep IMAGE --help: exit 0 ($(grep -m1 'Usage:' "$work/$ep.txt"))"
done
# The MCP server over stdio in the image (mcp, pydantic, anyio as bytecode only): initialize, list
# tools; stdin stays open until each answer is in (a closed stdin ends the server).
tools=$("$PY" - "$DOCKER" "$ws1" "$IMAGE" <<'PYEOF' 2>"$work/mcp.err" || true
import json, subprocess, sys
docker, ws, image = sys.argv[1:4]
proc = subprocess.Popen(
    [docker, "run", "--rm", "-i", "--read-only", "--tmpfs", "/tmp", "-v", f"{ws}:/workspace:ro",
     "--entrypoint", "dream-mcp", image],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def call(message, wait_for=None):
    proc.stdin.write(json.dumps(message) + "\n"); proc.stdin.flush()
    while wait_for is not None:
        reply = json.loads(proc.stdout.readline())
        if reply.get("id") == wait_for:
            return reply
call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
      "capabilities": {}, "clientInfo": {"name": "proof", "version": "1"}}}, 1)
call({"jsonrpc": "2.0", "method": "notifications/initialized"})
listed = call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, 2)
proc.stdin.close(); proc.wait(timeout=60)
print(len(listed["result"]["tools"]))
PYEOF
)
[ -n "$tools" ] && [ "$tools" -gt 0 ] || { cat "$work/mcp.err" >&2; die "dream-mcp in the image did not answer tools/list"; }
record "- docker run -i --entrypoint dream-mcp (stdio, workspace :ro): initialize and tools/list answered ($tools tools)"

# 5) every provider dream-memory names still loads in the slimmed venv
"$DOCKER" run --rm --network host --read-only --tmpfs /tmp -v "$REPO_ROOT/ci/docker/provider-smoke.py:/smoke.py:ro" \
  --entrypoint python3 "$IMAGE" /smoke.py "http://127.0.0.1:$port/v1" >"$work/smoke.txt" 2>"$work/smoke.err" \
  || { cat "$work/smoke.txt" "$work/smoke.err" >&2; die "a provider's code path no longer loads in the image"; }
record "- litellm in the image, one completion per provider against the scripted server (no ImportError):"
sed 's/^ */  /' "$work/smoke.txt" | tee -a "$results"

# 6) docker stop while dream-run waits on the model: tini (PID 1) passes SIGTERM on at once
"$PY" "$REPO_ROOT/ci/docker/llm-hang-on.py" "" --port-file "$work/hang.port" --hung-file "$work/hung" \
  >"$work/hang.log" 2>&1 &
hang_pid=$!
for _ in $(seq 1 100); do [ -s "$work/hang.port" ] && break; sleep 0.1; done
ws3="$work/ws-stop"
make_workspace "$ws3" 10001:10001
cid=$("$DOCKER" run -d --network host --read-only --tmpfs /tmp -v "$ws3:/workspace" -e DREAM_MODEL=openai/scripted \
  -e "DREAM_API_BASE=http://127.0.0.1:$(cat "$work/hang.port")/v1" -e DREAM_API_KEY=dummy "$IMAGE")
for _ in $(seq 1 600); do [ -e "$work/hung" ] && break; sleep 0.1; done
[ -e "$work/hung" ] || { "$DOCKER" logs "$cid" >&2; "$DOCKER" rm -f "$cid" >/dev/null; die "dream-run never reached the model"; }
t0=$(now); "$DOCKER" stop -t 10 "$cid" >/dev/null; t1=$(now)
stop_s=$(elapsed "$t0" "$t1")
stop_rc=$("$DOCKER" inspect --format '{{.State.ExitCode}}' "$cid")
pid1=$("$DOCKER" inspect --format '{{json .Config.Entrypoint}}' "$cid")
"$DOCKER" logs "$cid" >"$work/stop.out" 2>/dev/null || true
"$DOCKER" rm "$cid" >/dev/null
kill "$hang_pid" 2>/dev/null; wait "$hang_pid" 2>/dev/null || true; hang_pid=""
# Exit 143 and the interrupted report are the proof that SIGTERM reached dream-run; the time only
# has to stay below the 10 s grace (after it docker sends SIGKILL: exit 137). A 3 s bound failed
# at load 10-15 (3.74 s) with nothing wrong; 2.2-2.4 s is usual.
awk -v s="$stop_s" 'BEGIN { exit !(s < 9) }' || die "docker stop -t 10 took $stop_s s (expected < 9: SIGTERM was not passed on at once)"
[ "$stop_rc" -eq 143 ] || die "a stopped dream-run exited $stop_rc (expected 143)"
grep -q '"status": "interrupted"' "$work/stop.out" || die "a stopped dream-run printed no interrupted report"
record "- docker stop -t 10 while dream-run waits on the model: returned in **$stop_s s**, exit $stop_rc (entrypoint $pid1)"

# 7) a workspace the container cannot write: exit 2 at once, naming the owner, the uid and the fix
ws4="$work/ws-foreign"
make_workspace "$ws4" 4242:4242
chmod 755 "$ws4"
t0=$(now)
set +e
"$DOCKER" run --rm --network host --read-only --tmpfs /tmp -v "$ws4:/workspace" "${llm_env[@]}" "$IMAGE" \
  >/dev/null 2>"$work/foreign.err"
rc=$?
set -e
t1=$(now)
[ "$rc" -eq 2 ] || { cat "$work/foreign.err" >&2; die "over a workspace owned by 4242 the container exited $rc (expected 2)"; }
grep -q "owned by uid 4242" "$work/foreign.err" && grep -q "runs as uid 10001" "$work/foreign.err" \
  && grep -q "run as uid 4242" "$work/foreign.err" && grep -q fsGroup "$work/foreign.err" && grep -q chown "$work/foreign.err" \
  || { cat "$work/foreign.err" >&2; die "the error does not name the owner, the uid and the fixes"; }
grep -q Traceback "$work/foreign.err" && die "a traceback over a foreign workspace"
record "- docker run (uid 10001) over a workspace owned by 4242: exit $rc in $(elapsed "$t0" "$t1") s:"
sed 's/^/    /' "$work/foreign.err" | tee -a "$results"
set +e
"$DOCKER" run --rm --network host --read-only --tmpfs /tmp -v "$ws1:/workspace:ro" "${llm_env[@]}" "$IMAGE" \
  >/dev/null 2>"$work/ro.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "read-only file system" "$work/ro.err" || { cat "$work/ro.err" >&2; die "a read-only mount exited $rc"; }
record "- docker run with the workspace mounted :ro: exit $rc ($(head -n1 "$work/ro.err"))"

# 8) an agent (uid 1000) and Dream (uid 10001) on one folder, through a shared group (gid 2000),
#    a setgid folder and umask 0002 (docs/deploy-docker.md, sharing a workspace)
shared="$work/ws-shared"
install -d -o 1000 -g 2000 -m 2775 "$shared"
agent() { "$DOCKER" run --rm --network host --read-only --tmpfs /tmp --user 1000:2000 -v "$shared:/workspace" \
  --entrypoint /bin/sh "$IMAGE" -c "umask 0002 && exec dream $*"; }
agent init >/dev/null
agent append --session-key cli:direct "'- [durable] User fact number 1: prefers option 1 for setting 1.'" >/dev/null
set +e
"$DOCKER" run --rm --network host --read-only --tmpfs /tmp --user 10001:10001 --group-add 2000 -e DREAM_UMASK=0002 \
  -v "$shared:/workspace" "${llm_env[@]}" "$IMAGE" >"$work/shared.json" 2>"$work/shared.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$work/shared.err" >&2; die "Dream on the shared folder exited $rc"; }
set +e
agent append --session-key cli:direct "'- [durable] User fact number 2: prefers option 2 for setting 2.'" \
  >/dev/null 2>"$work/agent2.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$work/agent2.err" >&2; die "the agent could not write after Dream ran (exit $rc)"; }
owners=$(find "$shared" -path "$shared/.git" -prune -o -printf '%U\n' | sort | uniq -c \
  | awk '{ printf "%suid %s: %s", (NR > 1 ? ", " : ""), $2, $1 }')
not_group=$(find "$shared" \( -type f -o -type d \) ! -group 2000 | head -n3)
[ -z "$not_group" ] || die "files outside the shared group: $not_group"
record "- shared folder (setgid, gid 2000): agent uid 1000 \`dream init\` + \`append\`, Dream uid 10001 \`--group-add 2000 -e DREAM_UMASK=0002\`: exit 0, then the agent appends again: exit 0; files outside .git by owner ($owners), all of group 2000"

record "- scripted LLM server received $(wc -l <"$work/requests.jsonl") requests"
log "all container checks passed"
