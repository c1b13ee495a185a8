#!/usr/bin/env bash
# Makes a local stand-in for docker.io/library/python:3.10-slim where that image cannot be pulled
# (no Docker Hub from these machines; see deploy/README.md, "Building without Docker Hub").
#
#   deploy/make-base-image.sh [PYTHON]     # PYTHON: a Python 3.10 executable; default: the one
#                                          # scripts/setup.sh finds
#
# What python:3.10-slim is, rebuilt from what this machine has: Debian bookworm's minimal root
# file system (`debootstrap --variant=minbase`) with the runtime libraries a CPython build links
# (ca-certificates libssl3 libsqlite3-0 libreadline8 netbase tzdata, as the official image's
# Dockerfile keeps), plus this machine's Python 3.10, copied at its own prefix (its build has an
# rpath to that prefix, so it cannot move) with python3.10 / python3 / python links in
# /usr/local/bin, where the official image has them. When the prefix is under /root, /root is made
# traversable (0711) so that the image's non-root user can run it. Debian packages come from the
# machine's configured mirror; the machine's CA bundle is trusted for that download.
#
# Committed to buildah's storage (vfs, as `make image` uses it) as
# docker.io/library/python:3.10-slim, so the Dockerfile's FROM finds it with --pull=never.
# Needs root, buildah and debootstrap (`make image` installs them). Idempotent: does nothing when
# the image exists (FORCE=1 rebuilds it).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=docker.io/library/python:3.10-slim
BUILDAH=(buildah --storage-driver vfs)
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# The packages python:3.10-slim installs besides Python itself (its Dockerfile's runtime deps).
PACKAGES="ca-certificates libssl3 libsqlite3-0 libreadline8 libbz2-1.0 liblzma5 libffi8 zlib1g netbase tzdata"

log() { echo "[make-base-image $(date +%H:%M:%S)] $*"; }
die() { echo "make-base-image: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot)"
command -v buildah >/dev/null || die "buildah not found (apt-get install -y buildah)"
command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install -y debootstrap)"

if [ "${FORCE:-0}" != 1 ] && "${BUILDAH[@]}" inspect --type image "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE already exists (FORCE=1 to rebuild)"
  exit 0
fi

PYTHON=${1:-}
if [ -z "$PYTHON" ]; then
  # scripts/setup.sh's own search (python3.10 on PATH, else pyenv's versions).
  PYTHON=$(bash -c 'source <(sed -n "/^works()/p;/^find_python()/,/^}/p" scripts/setup.sh); find_python') ||
    die "no Python 3.10 found (the one scripts/setup.sh finds); pass one as an argument"
fi
[ -x "$PYTHON" ] || die "no Python 3.10 found (the one scripts/setup.sh finds); pass one as an argument"
PYTHON=$(readlink -f "$PYTHON")
PREFIX=$("$PYTHON" -c 'import sys; print(sys.base_prefix)')
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 10)' || die "$PYTHON is not Python 3.10"
log "Python: $PYTHON (prefix $PREFIX); Debian $SUITE from $MIRROR"

START=$(date +%s)
WORK=$(mktemp -d /var/tmp/rankpipe-base.XXXXXX)
CONTAINER=""
cleanup() {
  [ -n "$CONTAINER" ] && "${BUILDAH[@]}" rm "$CONTAINER" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
ROOTFS=$WORK/rootfs

log "debootstrap --variant=minbase $SUITE"
debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
  { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

log "apt-get install $PACKAGES"
# The machine's CA bundle, so that an HTTPS mirror (or a TLS-intercepting proxy) is trusted.
cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
for fs in proc sys dev; do mount --bind "/$fs" "$ROOTFS/$fs"; done
set +e
chroot "$ROOTFS" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*"
rc=$?
set -e
for fs in dev sys proc; do umount "$ROOTFS/$fs"; done
[ $rc = 0 ] || die "apt-get install in the new root file system failed (exit $rc)"
: >"$ROOTFS/etc/resolv.conf"

log "copying $PREFIX"
mkdir -p "$ROOTFS$PREFIX"
cp -a "$PREFIX/." "$ROOTFS$PREFIX/"
# Tests, caches and site-packages beyond pip/setuptools stay out (python:3.10-slim has none).
rm -rf "$ROOTFS$PREFIX"/lib/python3.10/test "$ROOTFS$PREFIX"/lib/python3.10/*/test
find "$ROOTFS$PREFIX" -name __pycache__ -prune -exec rm -rf {} +
for name in python3.10 python3 python; do ln -sf "$PREFIX/bin/python3.10" "$ROOTFS/usr/local/bin/$name"; done
case "$PREFIX" in /root/*) chmod 0711 "$ROOTFS/root" ;; esac
chroot "$ROOTFS" /usr/local/bin/python -c 'import ssl, sqlite3, venv, ensurepip; print("python ok")'

log "buildah commit $IMAGE"
CONTAINER=$("${BUILDAH[@]}" from scratch)
MNT=$("${BUILDAH[@]}" mount "$CONTAINER")
cp -a "$ROOTFS/." "$MNT/"
"${BUILDAH[@]}" umount "$CONTAINER" >/dev/null
"${BUILDAH[@]}" config \
  --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 --env PYTHON_VERSION="$("$PYTHON" -c 'import platform; print(platform.python_version())')" \
  --cmd python3 --os linux --arch amd64 "$CONTAINER"
"${BUILDAH[@]}" commit --quiet --rm "$CONTAINER" "$IMAGE" >/dev/null
CONTAINER=""
log "done in $(($(date +%s) - START))s: $IMAGE ($("${BUILDAH[@]}" inspect --type image --format '{{.Docker.Size}}' "$IMAGE" 2>/dev/null || echo '?') bytes)"
