#!/usr/bin/env bash
# debian-python.sh: a Debian bookworm image with Python 3 and pip, git, curl
# and the CA certificates, made offline from Debian's packages (debootstrap, then
# docker import): the base of the e2e suite's bring-your-own agent image and
# of its git remote (the egress tests use the stock tools), since no image
# can be pulled here.
#
# The image (FLOCK_PYTHON_IMAGE) is kept, and the root's tarball cached
# (FLOCK_TEST_CACHE), so later runs take a second. Needs root and debootstrap.
set -euo pipefail

IMAGE=${FLOCK_PYTHON_IMAGE:-flock-test/bookworm-tools:latest}
CACHE=${FLOCK_TEST_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/flock-test-images}
MIRROR=${FLOCK_TEST_MIRROR:-http://deb.debian.org/debian}

PACKAGES=python3,python3-pip,git,curl,ca-certificates
# The image and the tarball are kept per package list: a changed list
# makes them again.
if [[ $(docker image inspect -f '{{index .Config.Labels "flock.packages"}}' "$IMAGE" 2>/dev/null) == "$PACKAGES" ]]; then
  echo "debian-python: reusing $IMAGE"
  exit 0
fi
tarball=$CACHE/bookworm-tools-$(printf %s "$PACKAGES" | sha256sum | cut -c1-12).tar
if [[ ! -s $tarball ]]; then
  [[ $EUID -eq 0 ]] || { echo "debian-python: debootstrap needs root" >&2; exit 1; }
  command -v debootstrap >/dev/null || { echo "debian-python: debootstrap is not installed (tests/setup.sh installs it)" >&2; exit 1; }
  rootfs=$(mktemp -d /var/tmp/flock-python.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "debian-python: debootstrap --variant=minbase --include=$PACKAGES bookworm ($MIRROR)"
  start=$(date +%s)
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 ||
    { tail -n 20 "$rootfs.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs.log"
  mkdir -p "$CACHE"
  tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  echo "debian-python: root made in $(( $(date +%s) - start ))s"
fi
docker import --change "LABEL flock.packages=$PACKAGES" - "$IMAGE" <"$tarball" >/dev/null
echo "debian-python: imported $IMAGE"
