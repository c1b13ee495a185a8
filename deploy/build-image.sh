#!/usr/bin/env bash
# `make image`: builds deploy/Dockerfile on this machine, with whatever container tool works here.
#
#   deploy/build-image.sh        # env: IMAGE (name:tag, default rankpipe:<source tag>, below),
#                                #      TARGET (cpu | gpu, default cpu), PRETRAINED (0 | 1)
#
# - `docker build` (BuildKit) when `docker info` answers;
# - otherwise buildah (rootless-free, daemonless: `bud --isolation chroot` on the vfs storage
#   driver works on machines without a Docker daemon or overlay support), installed with apt-get
#   when missing. When python:3.10-slim is not in buildah's storage and cannot be pulled,
#   deploy/make-base-image.sh makes an equivalent one from debootstrap and this machine's
#   Python 3.10.
# The build trusts this machine's CA bundle for its downloads through the `ca-bundle` build
# secret (not stored in the image). A second run with nothing changed does nothing (a source hash
# label, see below). Prints each phase's time and the image's size.
# The default tag is pipelines/image_tag.py's: src-<hash of the files the image holds> (-gpu,
# -pretrained for those variants), the tag `rankpipe compile` gives a `runner.image` without one,
# so a compiled spec names the image built from the same source (buildah stores it as
# localhost/rankpipe:<tag>).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=${TARGET:-cpu}
PRETRAINED=${PRETRAINED:-0}
IMAGE=${IMAGE:-rankpipe:$(python3 pipelines/image_tag.py --target "$TARGET" --pretrained "$PRETRAINED")}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
BASE=docker.io/library/python:3.10-slim
BUILDAH=(buildah --storage-driver vfs)
START=$(date +%s)

log() { echo "[make image $(date +%H:%M:%S) +$(($(date +%s) - START))s] $*"; }
die() { echo "make image: $*" >&2; exit 1; }

case "$TARGET" in cpu | gpu) ;; *) die "TARGET=$TARGET: one of cpu, gpu" ;; esac
case "$PRETRAINED" in 0 | 1) ;; *) die "PRETRAINED=$PRETRAINED: 0 or 1" ;; esac
SECRET=()
if [ -s "$CA_BUNDLE" ]; then
  SECRET=(--secret "id=ca-bundle,src=$CA_BUNDLE")
else
  log "no CA bundle at $CA_BUNDLE: the build uses the base image's"
fi
ARGS=(-f deploy/Dockerfile --target "$TARGET" --build-arg "PRETRAINED=$PRETRAINED" "${SECRET[@]}" -t "$IMAGE")

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  log "docker build ${ARGS[*]} ."
  DOCKER_BUILDKIT=1 docker build "${ARGS[@]}" .
  log "built $IMAGE in $(($(date +%s) - START))s; size: $(docker image inspect --format '{{.Size}}' "$IMAGE") bytes"
  exit 0
fi

log "no Docker daemon (docker info failed): building with buildah"
need=()
for tool in buildah debootstrap; do command -v "$tool" >/dev/null 2>&1 || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "${need[*]} not found and not root: apt-get install -y buildah podman debootstrap"
  log "installing buildah podman debootstrap (apt-get)"
  if ! out=$( (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah podman debootstrap) 2>&1); then
    die "buildah not found and apt-get failed: $(echo "$out" | tail -5)"
  fi
fi

if ! "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  log "$BASE not in buildah's storage: trying to pull it"
  if ! "${BUILDAH[@]}" pull --quiet "$BASE" >/dev/null 2>&1; then
    log "cannot pull $BASE: making an equivalent (deploy/make-base-image.sh)"
    deploy/make-base-image.sh
  fi
fi

# Idempotent: the image is labelled with a hash of what goes into it (the Dockerfile, the locks,
# the project files the build copies, the arguments); the same hash means nothing to do. No
# --layers: on vfs every cached layer is a full copy of the file system (minutes per step).
SOURCE_HASH=$(
  {
    echo "$TARGET $PRETRAINED"
    git ls-files -z deploy/Dockerfile requirements*.lock scripts/setup.sh pyproject.toml README.md \
      pipelines components trainer_module schemas | xargs -0 sha256sum
    git ls-files -z --others --exclude-standard pipelines components trainer_module schemas |
      xargs -0 -r sha256sum
  } | sha256sum | cut -c1-16
)
HAVE=$("${BUILDAH[@]}" inspect --type image --format '{{index .Docker.Config.Labels "rankpipe.source-hash"}}' "$IMAGE" 2>/dev/null || true)
if [ "$HAVE" = "$SOURCE_HASH" ] && [ "${FORCE:-0}" != 1 ]; then
  log "$IMAGE is up to date (source hash $SOURCE_HASH; FORCE=1 rebuilds)"
  exit 0
fi
log "buildah bud ${ARGS[*]} . (source hash $SOURCE_HASH)"
"${BUILDAH[@]}" bud --isolation chroot --pull=never --label "rankpipe.source-hash=$SOURCE_HASH" \
  --ignorefile deploy/Dockerfile.dockerignore "${ARGS[@]}" .
# Stages left behind by a failed or interrupted build are containers; this build's are gone.
SIZE=$("${BUILDAH[@]}" images --format '{{.Size}}' --filter "reference=$IMAGE" | head -1)
log "built $IMAGE ($TARGET, PRETRAINED=$PRETRAINED) in $(($(date +%s) - START))s; size: $SIZE"
