#!/usr/bin/env bash
# Build the Dockerfile's base image locally: a slim Debian root made by mmdebstrap from this
# machine's own apt sources, with python3 (+venv) and the machine's CA certificates, then
# `docker import`ed and tagged as the Dockerfile's BASE_IMAGE. No image registry is contacted.
#
# Needs root and a running private dockerd (ci/docker/dockerd-start.sh). With DREAM_CI_CACHE set,
# the rootfs tarball is reused between local runs; CI leaves it unset and builds from scratch.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root
# mmdebstrap rather than debootstrap: apt resolves and downloads in parallel and dpkg unpacks
# in one go; the same minbase root with the same packages took 53-97 s and 22 CPU s here, against
# debootstrap's 215 s in a CI run (issue 16: the CI budget).
apt_install mmdebstrap
TAG="${1:-$(base_image_name)}"
[ -n "$TAG" ] || die "no ARG BASE_IMAGE=... line in Dockerfile"
PACKAGES="python3,python3-venv,ca-certificates"

. /etc/os-release
SUITE="${VERSION_CODENAME:-}"
[ -n "$SUITE" ] || skip "this machine's /etc/os-release names no Debian codename to debootstrap"

# The first mirror in this machine's apt sources that serves $SUITE (and $SUITE-security).
apt_uri_for() {  # apt_uri_for SUITE
  local suite="$1" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '
      /^[[:space:]]*$/ { if (u != "" && ok) { print u; exit } u=""; ok=0; next }
      /^URIs:/ { u=$2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) ok=1 }
      END { if (u != "" && ok) print u }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '$1 == "deb" && $0 !~ /\[/ && $3 == s { print $2 } $1 == "deb" && $0 ~ /\]/ {
      for (i = 2; i <= NF; i++) if ($i ~ /\]$/) { if ($(i+2) == s) print $(i+1); break } }' "$f"
  done
}
MIRROR="$(apt_uri_for "$SUITE" | head -n1)"
SECURITY="$(apt_uri_for "$SUITE-security" | head -n1)"
[ -n "$MIRROR" ] || skip "no apt source for suite $SUITE found in /etc/apt (mmdebstrap needs one)"

CA_DIR=/usr/local/share/ca-certificates
key="$( { echo "$SUITE $MIRROR $SECURITY $PACKAGES mmdebstrap v3"; find "$CA_DIR" -type f -exec sha256sum {} + 2>/dev/null | sort; } | sha256sum | cut -c1-16)"
tarball=""
if [ -n "${DREAM_CI_CACHE:-}" ]; then
  mkdir -p "$DREAM_CI_CACHE"
  tarball="$DREAM_CI_CACHE/base-$SUITE-$key.tar"
fi

if [ -z "$tarball" ] || [ ! -s "$tarball" ]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/dream-base.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  rootfs="$work/rootfs"
  # Commands in the new root get a clean environment: the caller's TMPDIR (and anything else
  # pointing into this machine's filesystem) does not exist in there.
  in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 chroot "$rootfs" "$@"; }
  log "mmdebstrap --variant=minbase $SUITE from $MIRROR (+ $PACKAGES)"
  t0=$(date +%s)
  # The merged-/usr hook lays out /bin -> usr/bin itself, as debootstrap does; without it
  # mmdebstrap installs the usrmerge package, which pulls in perl (47 MB more in the image).
  hooks=()
  [ -d /usr/share/mmdebstrap/hooks/merged-usr ] && hooks=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
  mmdebstrap --variant=minbase "${hooks[@]}" --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" \
    >"$work/mmdebstrap.log" 2>&1 || { tail -n 30 "$work/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
  log "mmdebstrap took $(( $(date +%s) - t0 )) s"
  {
    echo "deb $MIRROR $SUITE main"
    echo "deb $MIRROR $SUITE-updates main"
    [ -n "$SECURITY" ] && echo "deb $SECURITY $SUITE-security main"
  } >"$rootfs/etc/apt/sources.list"
  # Outbound TLS may be re-signed by a local CA: the image trusts what this machine trusts.
  if compgen -G "$CA_DIR/*" >/dev/null; then
    cp -a "$CA_DIR/." "$rootfs$CA_DIR/"
    in_root update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the rootfs"
  fi
  # pip (bundled certifi) would ignore the system store; point it at it.
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"
  # Slim it: no package caches, lists, docs, man pages or translations.
  in_root apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/tmp/* "$rootfs"/var/tmp/*
  # glibc's iconv modules for legacy charsets: Python has its own codecs and UTF-8 is built into
  # glibc, so nothing in the image loads them (8 MB).
  rm -rf "$rootfs"/usr/lib/*-linux-gnu/gconv
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
  out="${tarball:-$work/base.tar}"
  tar -C "$rootfs" --numeric-owner -cf "$out.partial" .
  mv "$out.partial" "$out"
  tarball="$out"
else
  log "reusing cached base rootfs $tarball"
fi

log "docker import -> $TAG ($(du -h "$tarball" | cut -f1) rootfs)"
"$DOCKER" import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  "$tarball" "$TAG" >/dev/null
"$DOCKER" run --rm --network host "$TAG" python3 -c 'import sys, ssl, venv; print("base image python", sys.version.split()[0])'
