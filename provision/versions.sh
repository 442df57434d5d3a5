#!/usr/bin/env bash
# Pinned tool versions and the SHA-256 of their official release archives
# (sourced by provision.sh). Bump a version and its checksums together.
#
# Go: https://go.dev/dl/?mode=json&include=all lists the sha256 of every
#     archive. go.mod asks for go 1.26.6; 1.26.8 satisfies it, so the go
#     command never needs to download another toolchain.
# Pulumi: https://github.com/pulumi/pulumi/releases/download/v<V>/pulumi-<V>-checksums.txt
#     The pinned CLI (3.255.0) is older than the Go SDK in go.mod (v3.263.0).
#     Pulumi keeps the engine/SDK protocol compatible across minor releases,
#     but this pairing has not been run here (no Pulumi CLI download in CI).
#     For a newer CLI set FLOCK_PULUMI_VERSION and FLOCK_PULUMI_SHA256.
#
# Overriding a version requires the matching checksum (FLOCK_GO_SHA256,
# FLOCK_PULUMI_SHA256): provisioning never installs an unverified archive.

# shellcheck disable=SC2034 # used by the scripts that source this file
FLOCK_PINNED_GO_VERSION=1.26.8
# shellcheck disable=SC2034
FLOCK_PINNED_PULUMI_VERSION=3.255.0

# pinned_go_sha256 VERSION DEB_ARCH
pinned_go_sha256() {
  case "$1/$2" in
    1.26.8/amd64) echo d0f743b33e8d8945e6b1f432edd15785c70507121d6e2a723b21285eddf8b57b ;;
    1.26.8/arm64) echo 211ffced9dcb9633a55eac6364816ec0ddd951389a740e88fa8b3337971bdda0 ;;
    *) return 1 ;;
  esac
}

# pinned_pulumi_sha256 VERSION PULUMI_ARCH (x64 or arm64)
pinned_pulumi_sha256() {
  case "$1/$2" in
    3.255.0/x64) echo cf559568e2c32f7fae56ea3de8ae5fa48973ba8c5aa9dd2b3dc0c8898fe50dba ;;
    3.255.0/arm64) echo 699fbc6ea848d997e9b3645487f108d27b1b55ec807c7576406131e6e080f0e3 ;;
    *) return 1 ;;
  esac
}
