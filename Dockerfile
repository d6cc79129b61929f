# dream-memory: Dream as a container. `docker run IMAGE` runs `dream-run` on /workspace.
#
#   docker build --network host -t dream-memory:0.1.0 .
#   docker run --rm -v "$PWD/ws:/workspace" -e DREAM_MODEL=... -e DREAM_API_KEY dream-memory:0.1.0
#
# BASE_IMAGE is any Debian-based image with python3 (>= 3.11) and the venv module. The default
# name is built locally by ci/docker/base-image.sh (debootstrap, no registry involved); elsewhere
# pass e.g. --build-arg BASE_IMAGE=<a python:3.11-slim-bookworm image you trust>.
# docs/deploy-docker.md has the details, the measured size and the cold-start time.
ARG BASE_IMAGE=dream-memory-base:bookworm

# ---- builder: a venv with dream-memory and its dependencies --------------------------------------
FROM ${BASE_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/dream
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# Byte-compiled at build time: the root filesystem is read-only at run time (Kubernetes).
RUN /opt/dream/bin/pip install --no-warn-script-location . \
 && /opt/dream/bin/python -m compileall -q /opt/dream/lib \
 && /opt/dream/bin/dream-run --help >/dev/null

# ---- common runtime: non-root user, the venv, the workspace --------------------------------------
FROM ${BASE_IMAGE} AS runtime-base
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
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/dream
WORKDIR /workspace

# ---- git: adds git and dream-git-sync for the clone/run/push Kubernetes variant ------------------
# Build with --target git (deploy/kubernetes/cronjob-git.yaml).
FROM runtime-base AS git
# Debian's stable git; security updates come with a rebuilt base image.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
COPY deploy/kubernetes/dream-git-sync.sh /usr/local/bin/dream-git-sync
USER 10001:10001
ENTRYPOINT ["dream-git-sync"]

# ---- runtime (the default target): dream-run -----------------------------------------------------
FROM runtime-base AS runtime
USER 10001:10001
ENTRYPOINT ["dream-run"]
