# dream-memory: Dream as a container. `docker run IMAGE` runs `dream-run` on /workspace.
#
#   docker build --network host -t dream-memory:0.1.0 .
#   docker run --rm -v "$PWD/ws:/workspace" -e DREAM_MODEL=... -e DREAM_API_KEY dream-memory:0.1.0
#
# BASE_IMAGE is any Debian-based image with python3 (>= 3.11) and the venv module. The default
# name is built locally by ci/docker/base-image.sh (debootstrap, no registry involved); elsewhere
# pass e.g. --build-arg BASE_IMAGE=<a python:3.11-slim-bookworm image you trust>.
# DREAM_SLIM=0 keeps the dependencies no dream-memory code path uses (deploy/docker/slim_venv.py).
# docs/deploy-docker.md has the details, the measured size of each layer and the cold-start time.
ARG BASE_IMAGE=dream-memory-base:bookworm

# ---- builder: a venv with dream-memory and its dependencies, slimmed ----------------------------
FROM ${BASE_IMAGE} AS builder
ARG DREAM_SLIM=1
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True
# binutils only for `strip`; it stays in this stage.
# hadolint ignore=DL3008,DL3009
RUN --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=cache,target=/var/cache/apt,sharing=locked \
    apt-get update \
 && apt-get install -y --no-install-recommends binutils
RUN python3 -m venv /opt/dream
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# --no-compile: slim_venv.py byte-compiles once, after the slimming.
RUN /opt/dream/bin/pip install --no-compile --no-warn-script-location .
# Byte-compiled at build time (by slim_venv.py): the root filesystem is read-only at run time.
COPY deploy/docker/slim_venv.py /usr/local/lib/slim_venv.py
RUN DREAM_SLIM=${DREAM_SLIM} /opt/dream/bin/python /usr/local/lib/slim_venv.py /opt/dream \
 && /opt/dream/bin/dream-run --help >/dev/null

# ---- common runtime: an init, a non-root user, the venv, the workspace ---------------------------
FROM ${BASE_IMAGE} AS runtime-base
# tini is PID 1: it forwards SIGTERM (docker stop, a pod's deletion) to Dream and reaps, so a stop
# takes effect at once instead of waiting out the grace period (a process as PID 1 has no default
# signal actions). Debian's stable tini; security updates come with a rebuilt base image.
# hadolint ignore=DL3008,DL3009
RUN --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=cache,target=/var/cache/apt,sharing=locked \
    apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -f /usr/bin/tini-static \
 && rm -rf /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old
# A fixed numeric uid/gid so Kubernetes' runAsNonRoot can verify it and host mounts can be
# chowned to it (docs/deploy-docker.md: file ownership).
RUN groupadd --gid 10001 dream \
 && useradd --no-log-init --uid 10001 --gid 10001 --home-dir /home/dream --create-home \
      --shell /usr/sbin/nologin dream \
 && install -d -o 10001 -g 10001 -m 0775 /workspace
COPY --from=builder /opt/dream /opt/dream
ENV PATH=/opt/dream/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DREAM_WORKSPACE=/workspace \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    PYTHONUNBUFFERED=1 \
    HOME=/home/dream
WORKDIR /workspace

# ---- git: adds git and dream-git-sync for the clone/run/push Kubernetes variant ------------------
# Build with --target git (deploy/kubernetes/cronjob-git.yaml).
FROM runtime-base AS git
# Debian's stable git; security updates come with a rebuilt base image.
# hadolint ignore=DL3008,DL3009
RUN --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=cache,target=/var/cache/apt,sharing=locked \
    apt-get update \
 && apt-get install -y --no-install-recommends git \
 && rm -rf /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old
COPY deploy/kubernetes/dream-git-sync.sh /usr/local/bin/dream-git-sync
USER 10001:10001
ENTRYPOINT ["/usr/bin/tini", "--", "dream-git-sync"]

# ---- runtime (the default target): dream-run -----------------------------------------------------
FROM runtime-base AS runtime
USER 10001:10001
# Stopped (SIGTERM), dream-run ends after the model call in flight (at most 2 s) with the
# interrupted report and exit 143 (128 + 15); the committed batches stay, the next run continues.
ENTRYPOINT ["/usr/bin/tini", "--", "dream-run"]
