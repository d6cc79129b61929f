#!/usr/bin/env bash
# The container, for real: install Debian's docker.io and mmdebstrap when missing, start a private
# dockerd (own socket and data-root under $DREAM_CI_ROOT, no bridge, no iptables), mmdebstrap the
# base image from this machine's apt sources and CA certificates, docker build the Dockerfile, and
# run it against sample workspaces with the scripted LLM server on the host network
# (ci/docker/container-proof.sh lists every check), then the Kubernetes manifests simulated with
# docker as declared (ci/docker/k8s-proof.sh). As soon as the base image exists, the action's own
# install under act (ci/docker/act-proof.sh, mostly waiting on the package index) starts beside
# the build; this step waits for it. dockerd is stopped by its PID on exit; its data-root is kept
# for 70-action.sh, which removes it.
# Skips (loudly) only when the machine cannot: not root, or no apt/dockerd/mmdebstrap to be had.
set -euo pipefail
cd "$(dirname "$0")/../.."
. ci/docker/lib.sh
. ci/docker/venv-ready.sh
t0=$(date +%s)
need_root
# Start clean: a previous run's engine and images are not reused (DREAM_CI_CACHE, when set, only
# keeps the mmdebstrapped rootfs tarball).
bash ci/docker/dockerd-stop.sh --purge
act_pid=""
finish() {
  [ -n "$act_pid" ] && { wait "$act_pid" 2>/dev/null || true; }
  bash ci/docker/dockerd-stop.sh
}
trap finish EXIT
step_run ci/docker/dockerd-start.sh
step_run ci/docker/base-image.sh
# dockerd and the base image need no .venv, so .ci/run starts this lane before its own install;
# what follows does (the wheel, the scripted server, `dream` itself): wait for it here.
wait_for_venv
act_log="$DREAM_CI_ROOT/act-proof.log"
( DREAM_SKIP_EXIT=3 bash ci/docker/act-proof.sh >"$act_log" 2>&1 ) &
act_pid=$!
step_run ci/docker/container-proof.sh
step_run ci/docker/k8s-proof.sh
act_rc=0
wait "$act_pid" || act_rc=$?
act_pid=""
echo "--- ci/docker/act-proof.sh (run beside the image build)"
cat "$act_log"
case "$act_rc" in
  0) ;;
  3) echo "SKIPPED act-proof.sh: the machine cannot run this proof (reason above)" ;;
  *) echo "act-proof.sh failed (exit $act_rc)" >&2; exit "$act_rc" ;;
esac
echo "60-container.sh: passed in $(( $(date +%s) - t0 )) s"
