# The runner image for act (ci/docker/act-proof.sh): the locally built base image (Debian,
# python3 + venv, this machine's CA certificates) plus git and bash, standing in for
# ubuntu-latest. Built with `docker build --network host -f ci/docker/runner.Dockerfile ci/docker`.
# The action's venv comes ready from the dream-memory image (DREAM_IMAGE, built just before), at
# the place the action looks for it ($RUNNER_TEMP/dream-memory-venv), so the workflow runs spend
# no time on pip; ci/docker/act/dream-action.yml removes it first to prove the install itself.
ARG BASE_IMAGE=dream-memory-base:bookworm
ARG DREAM_IMAGE=dream-memory:ci
FROM ${DREAM_IMAGE} AS dream
FROM ${BASE_IMAGE}
# Debian's stable git and bash; the image lives only for the proof.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bash \
 && rm -rf /var/lib/apt/lists/*
COPY --from=dream /opt/dream /opt/dream
RUN ln -s /opt/dream /tmp/dream-memory-venv
