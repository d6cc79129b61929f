#!/usr/bin/env bash
# Stop the private dockerd started by dockerd-start.sh, by its PID, and (with --purge) remove its
# data-root and the proofs' files, leaving other lanes' folders under $DREAM_CI_ROOT alone. Safe to
# call when nothing runs.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
pid=""
for f in "$DREAM_CI_ROOT/dockerd.launcher.pid" "$DREAM_CI_ROOT/dockerd.pid"; do
  if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then pid="$(cat "$f")"; break; fi
done
if [ -n "$pid" ]; then
  # Containers first, so none is left running under a dockerd that is gone.
  ids="$("$DOCKER" ps -aq 2>/dev/null || true)"
  [ -n "$ids" ] && "$DOCKER" rm -f $ids >/dev/null 2>&1
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    log "dockerd did not stop in 30 s; sending KILL to pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
  fi
fi
rm -f "$DREAM_CI_ROOT/dockerd.pid" "$DREAM_CI_ROOT/dockerd.launcher.pid"
if [ "${1:-}" = "--purge" ] && [ -d "$DREAM_CI_ROOT" ]; then
  # Unmount anything dockerd left mounted under its folders before removing them.
  grep -F " $DREAM_CI_ROOT/" /proc/self/mounts | awk '{print $2}' | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  # Only what this lane made: dockerd's folders and the proofs' files at the top. Other CI lanes
  # (ci/steps/65-real-model.sh keeps its work in $DREAM_CI_ROOT/real-model) run beside this one.
  rm -rf "$DREAM_CI_ROOT"/data-* "$DREAM_CI_ROOT/exec"
  find "$DREAM_CI_ROOT" -mindepth 1 -maxdepth 1 ! -type d -exec rm -f {} +
  rmdir "$DREAM_CI_ROOT" 2>/dev/null || true
fi
exit 0
