# The runner images for act, standing in for ubuntu-latest: the locally built base image (Debian,
# python3 + venv, this machine's CA certificates) plus git and bash.
#   --target runner       ci/docker/act-proof.sh: the action installs itself, as on GitHub
#   --target runner-venv  ci/docker/act-workflows-proof.sh: the action's venv comes ready from the
#                         dream-memory image (DREAM_IMAGE) at the place the action looks for it
#                         ($RUNNER_TEMP/dream-memory-venv), so those runs spend no time on pip
# Built with `docker build --network host -f ci/docker/runner.Dockerfile --target ... ci/docker`.
ARG BASE_IMAGE=dream-memory-base:bookworm
ARG DREAM_IMAGE=dream-memory:ci
FROM ${BASE_IMAGE} AS runner
# Debian's stable git and bash; the image lives only for the proof.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bash \
 && rm -rf /var/lib/apt/lists/*

FROM ${DREAM_IMAGE} AS dream

FROM runner AS runner-venv
COPY --from=dream /opt/dream /opt/dream
RUN ln -s /opt/dream /tmp/dream-memory-venv
