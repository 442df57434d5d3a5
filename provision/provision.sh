#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Provision a Docker host for AI Flock: Ubuntu 24.04 (the Vagrant VM) or
# Debian 12. Idempotent: run it again and every line says "unchanged".
#
#   sudo provision/provision.sh                 # what `vagrant up` runs
#   sudo FLOCK_GVISOR=1 provision/provision.sh  # also gVisor (runtime "runsc")
#
# Toggles (environment; 1 = on):
#   FLOCK_GVISOR=1            install runsc and register it as runtime "runsc"
#   FLOCK_RUNSC_PATH=PATH     register this runsc binary instead of the package
#   FLOCK_USERNS_REMAP=1      dockerd "userns-remap": "default" (README: trade-offs)
#   FLOCK_SKIP_GO=1           do not install Go
#   FLOCK_GO_TARBALL=FILE     install Go from this local archive (checksum-checked)
#   FLOCK_SKIP_PULUMI=1       do not install the Pulumi CLI
#   FLOCK_PULUMI_TARBALL=FILE install Pulumi from this local archive
#   FLOCK_USER=NAME           the operator added to group docker (default vagrant)
#   FLOCK_ROOT=DIR            flock host root (default /srv/flock)
#   FLOCK_DOCKER_POOL, FLOCK_DOCKER_POOL_SIZE, FLOCK_NETWORK_POOL,
#   FLOCK_DOCKER_LOG_MAX_SIZE, FLOCK_DOCKER_LOG_MAX_FILE,
#   FLOCK_FORWARD_PORTS, FLOCK_FORWARD_ADDRESS: see lib/docker.sh, lib/host.sh
#
# Without systemd (containers, the CI test) configuration is written but no
# service is started or restarted.
set -euo pipefail

FLOCK_PROVISION_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$FLOCK_PROVISION_DIR/lib/common.sh"
. "$FLOCK_PROVISION_DIR/versions.sh"
. "$FLOCK_PROVISION_DIR/lib/docker.sh"
. "$FLOCK_PROVISION_DIR/lib/host.sh"
. "$FLOCK_PROVISION_DIR/lib/toolchain.sh"

main() {
  require_root
  [[ -r /etc/os-release ]] || die "cannot identify the OS (/etc/os-release missing)"
  # shellcheck disable=SC1091
  local os_id os_version
  os_id=$(. /etc/os-release && echo "${ID:-}")
  os_version=$(. /etc/os-release && echo "${VERSION_ID:-}")
  case "$os_id/$os_version" in
    ubuntu/24.04 | debian/12) ;;
    *) notice "tested on Ubuntu 24.04 and Debian 12; this is $os_id $os_version, continuing" ;;
  esac
  command -v apt-get >/dev/null || die "apt-get not found: only Debian and Ubuntu are supported"
  notice "provisioning $os_id $os_version ($(deb_arch)); systemd $(systemd_running && echo running || echo 'not running')"

  trap 'unblock_service_starts; run_cleanup' EXIT
  block_service_starts

  provision_docker
  provision_flock_dirs
  provision_disk_mounts
  provision_docker_group
  provision_port_forwarders
  install_go
  install_pulumi

  unblock_service_starts
  printf 'provision: done: %d changed, %d unchanged, %d skipped\n' \
    "$FLOCK_N_CHANGED" "$FLOCK_N_UNCHANGED" "$FLOCK_N_SKIPPED"
}

main "$@"
