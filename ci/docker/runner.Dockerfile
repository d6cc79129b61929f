# The runner image for act (ci/docker/act-proof.sh): the locally built base image (Debian,
# python3 + venv, this machine's CA certificates) plus git and bash, standing in for
# ubuntu-latest. Built with `docker build --network host -f ci/docker/runner.Dockerfile ci/docker`.
ARG BASE_IMAGE=dream-memory-base:bookworm
FROM ${BASE_IMAGE}
# Debian's stable git and bash; the image lives only for the proof.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bash \
 && rm -rf /var/lib/apt/lists/*
