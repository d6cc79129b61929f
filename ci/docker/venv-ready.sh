# wait_for_venv: the background lanes of .ci/run start before its install; a proof that needs
# .venv waits here until .ci/run touches $DREAM_CI_VENV_READY (unset: run by hand, no wait).
# Sourced by ci/steps/60-container.sh and ci/steps/65-real-model.sh.
wait_for_venv() {
  [ -n "${DREAM_CI_VENV_READY:-}" ] || return 0
  local waited=0
  until [ -e "$DREAM_CI_VENV_READY" ]; do
    if [ "$waited" -ge 1200 ]; then
      printf '[%s] FAILED: .venv was not ready after 20 min\n' "$(basename "$0")" >&2
      exit 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
}
