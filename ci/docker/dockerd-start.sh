#!/usr/bin/env bash
# Start a private dockerd (Debian docker.io) for the container proofs; prints nothing on stdout.
# Socket, data-root and exec-root live under $DREAM_CI_ROOT; stop it with ci/docker/dockerd-stop.sh.
# vfs storage and no bridge/iptables: works without overlayfs or netfilter; containers and builds
# use --network host.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root
command -v dockerd >/dev/null && [ -x /usr/bin/docker ] || apt_install docker.io
command -v dockerd >/dev/null || skip "dockerd is not installable here (apt-get install docker.io failed)"

mkdir -p "$DREAM_CI_ROOT"
if [ -f "$DREAM_CI_ROOT/dockerd.pid" ] && kill -0 "$(cat "$DREAM_CI_ROOT/dockerd.pid")" 2>/dev/null; then
  log "dockerd already running (pid $(cat "$DREAM_CI_ROOT/dockerd.pid"))"
  exit 0
fi
mkdir -p "$DREAM_CI_ROOT/data" "$DREAM_CI_ROOT/exec"
log "starting dockerd on $DOCKER_HOST (data-root $DREAM_CI_ROOT/data)"
dockerd \
  --host "$DOCKER_HOST" \
  --data-root "$DREAM_CI_ROOT/data" \
  --exec-root "$DREAM_CI_ROOT/exec" \
  --pidfile "$DREAM_CI_ROOT/dockerd.pid" \
  --storage-driver vfs \
  --iptables=false --ip6tables=false --bridge=none \
  >"$DREAM_CI_ROOT/dockerd.log" 2>&1 </dev/null &
echo $! >"$DREAM_CI_ROOT/dockerd.launcher.pid"
for _ in $(seq 1 120); do
  if "$DOCKER" version >/dev/null 2>&1; then
    log "dockerd ready: $("$DOCKER" version --format 'server {{.Server.Version}}, storage vfs')"
    exit 0
  fi
  if ! kill -0 "$(cat "$DREAM_CI_ROOT/dockerd.launcher.pid")" 2>/dev/null; then
    tail -n 30 "$DREAM_CI_ROOT/dockerd.log" >&2 || true
    die "dockerd exited during start (log above)"
  fi
  sleep 0.5
done
tail -n 30 "$DREAM_CI_ROOT/dockerd.log" >&2 || true
die "dockerd did not answer on $DOCKER_HOST within 60 s"
