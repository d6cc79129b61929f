#!/usr/bin/env bash
# Start a private dockerd (Debian docker.io) for the container proofs; prints nothing on stdout.
# Socket, data-root and exec-root live under $DREAM_CI_ROOT; stop it with ci/docker/dockerd-stop.sh.
# No bridge and no iptables (containers and builds use --network host).
# Storage: DREAM_DOCKER_STORAGE=overlay2|vfs|auto (default auto: overlay2 when the kernel offers
# overlayfs and dockerd comes up with it, else vfs). Measured here: with vfs every `docker run` of
# the ~500 MB image copies its whole filesystem (~30 s per container); with overlay2 it is ~0.3 s.
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
start_dockerd() {  # start_dockerd DRIVER: 0 when it answers with that driver
  local driver="$1"
  mkdir -p "$DREAM_CI_ROOT/data-$driver" "$DREAM_CI_ROOT/exec"
  log "starting dockerd on $DOCKER_HOST (storage $driver, data-root $DREAM_CI_ROOT/data-$driver)"
  dockerd \
    --host "$DOCKER_HOST" \
    --data-root "$DREAM_CI_ROOT/data-$driver" \
    --exec-root "$DREAM_CI_ROOT/exec" \
    --pidfile "$DREAM_CI_ROOT/dockerd.pid" \
    --storage-driver "$driver" \
    --iptables=false --ip6tables=false --bridge=none \
    >"$DREAM_CI_ROOT/dockerd.log" 2>&1 </dev/null &
  echo $! >"$DREAM_CI_ROOT/dockerd.launcher.pid"
  for _ in $(seq 1 120); do
    if "$DOCKER" version >/dev/null 2>&1; then
      local got
      got="$("$DOCKER" info --format '{{.Driver}}' 2>/dev/null || true)"
      log "dockerd ready: server $("$DOCKER" version --format '{{.Server.Version}}'), storage $got"
      [ "$got" = "$driver" ] && return 0
      return 1
    fi
    kill -0 "$(cat "$DREAM_CI_ROOT/dockerd.launcher.pid")" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

storage="${DREAM_DOCKER_STORAGE:-auto}"
if [ "$storage" = auto ]; then
  if grep -qw overlay /proc/filesystems 2>/dev/null || modprobe overlay 2>/dev/null; then
    if start_dockerd overlay2; then exit 0; fi
    tail -n 5 "$DREAM_CI_ROOT/dockerd.log" >&2 || true
    log "overlay2 did not work here; falling back to vfs"
    bash "$(dirname "$0")/dockerd-stop.sh"
  else
    log "no overlayfs in this kernel; using vfs"
  fi
  storage=vfs
fi
if start_dockerd "$storage"; then exit 0; fi
tail -n 30 "$DREAM_CI_ROOT/dockerd.log" >&2 || true
bash "$(dirname "$0")/dockerd-stop.sh"
# A dockerd that cannot start (no cgroups or namespaces for it, say) means the machine cannot run
# containers at all: that is a skip, with dockerd's own words above.
skip "dockerd did not come up with storage $storage on $DOCKER_HOST (its log is above)"
