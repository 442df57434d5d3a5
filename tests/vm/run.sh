#!/usr/bin/env bash
# The development VM for real (`make vm-test`): Vagrant + libvirt on this
# machine, offline except for Debian's package mirror.
#
#   sudo bash tests/vm/run.sh
#
# 1. Host side: the apt packages (vagrant, vagrant-libvirt, libvirt, qemu),
#    libvirtd and virtlogd running (started by hand where systemd is not PID 1),
#    libvirt's default network active.
# 2. The box flock/debian-12 (tests/vm/build-box.sh; cached).
# 3. `vagrant up --provider libvirt`, which provisions as `make vm-up` does,
#    with FLOCK_GVISOR=1 (runsc from Debian) and FLOCK_SKIP_GO=1
#    FLOCK_SKIP_PULUMI=1: there is no internet for the official Go and Pulumi
#    archives, and the flock is deployed from the host over SSH.
# 4. `vagrant provision` again: it must report "0 changed".
# 5. tests/vm/fixtures.sh in the VM: a busybox image made FROM scratch
#    (Debian's busybox-static: no registry) and a stand-in for the NATS
#    monitoring port on 127.0.0.1:8222; then `sudo /vagrant/provision/verify-vm.sh`: every check must pass and
#    none be skipped; and the stand-in must answer on the host through the
#    Vagrant forwarded port.
# 6. The dev stack deployed into the VM's engine from this host through
#    docker:host ssh://vagrant@flock-vm (the host steps run over SSH), the
#    bus reached from the host through the forwarded ports, the isolation
#    probes run in the VM against it, the flock destroyed with nothing left
#    (tests/vm/vmflock).
# 7. `vagrant destroy -f`, also when anything above fails.
#
# Domain type: kvm when the host has hardware KVM (/dev/kvm plus kvm_intel or
# kvm_amd), else qemu (TCG, software emulation). FLOCK_VM_LIBVIRT_DRIVER
# overrides. The machine lives in .vagrant/vm-test (VAGRANT_DOTFILE_PATH), so a
# VM of your own from `make vm-up` is left alone.
#
# Environment (defaults in brackets):
#   FLOCK_VM_LIBVIRT_DRIVER   kvm or qemu [detected]
#   FLOCK_VM_LIBVIRT_NETWORK  management network [10.213.121.0/24: outside
#                             Docker's default pools and the flock's subnets]
#   FLOCK_VM_BUS_PORT, FLOCK_VM_MONITOR_PORT  host ports [14222, 18222: the
#                             host's own test bus has 4222]
#   FLOCK_VM_CPUS, FLOCK_VM_MEMORY  [2, 4096]
#   FLOCK_VM_TEST_KEEP=1      do not destroy the VM at the end (debugging)
#   FLOCK_VM_TEST_LOGS=DIR    where the logs go [a new temporary directory]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# cidr_overlap, shared with provisioning (its die is replaced below).
# shellcheck source=provision/lib/common.sh
. "$ROOT/provision/lib/common.sh"

export VAGRANT_CWD=$ROOT
export VAGRANT_DOTFILE_PATH=$ROOT/.vagrant/vm-test
export VAGRANT_CHECKPOINT_DISABLE=1
export FLOCK_VM_BOX_LIBVIRT=${FLOCK_VM_BOX_LIBVIRT:-flock/debian-12}
export FLOCK_VM_SYNC_TYPE=${FLOCK_VM_SYNC_TYPE:-rsync}
export FLOCK_VM_BUS_PORT=${FLOCK_VM_BUS_PORT:-14222}
export FLOCK_VM_MONITOR_PORT=${FLOCK_VM_MONITOR_PORT:-18222}
export FLOCK_VM_LIBVIRT_NETWORK=${FLOCK_VM_LIBVIRT_NETWORK:-10.213.121.0/24}
# Provisioning toggles, passed into the VM by the Vagrantfile.
export FLOCK_GVISOR=1 FLOCK_SKIP_GO=1 FLOCK_SKIP_PULUMI=1
# Anything else FLOCK_* from the caller's environment would reach the
# provisioning too; the test wants exactly the toggles above.
while IFS='=' read -r name _; do
  case $name in
    FLOCK_VM_* | FLOCK_GVISOR | FLOCK_SKIP_GO | FLOCK_SKIP_PULUMI) ;;
    FLOCK_*) unset "$name" ;;
  esac
done < <(env)

VERIFY_IMAGE=flock-verify:busybox
KEEP=${FLOCK_VM_TEST_KEEP:-0}
LOGS=${FLOCK_VM_TEST_LOGS:-$(mktemp -d /tmp/flock-vm-test.XXXXXX)}
mkdir -p "$LOGS"

T_START=$(date +%s)
TIMINGS=()
say() { printf 'vm-test: %s\n' "$*"; }
die() {
  printf 'vm-test: FAIL: %s\n' "$*" >&2
  exit 1
}
# timed LABEL SECONDS: remember one measured step for the summary.
timed() {
  TIMINGS+=("$(printf '%-44s %5d s' "$1" "$2")")
  say "$1: $2 s"
}
summary() {
  local t
  say "timings (driver $FLOCK_VM_LIBVIRT_DRIVER):"
  for t in "${TIMINGS[@]}"; do printf '  %s\n' "$t"; done
  printf '  %-44s %5d s\n' total "$(($(date +%s) - T_START))"
  say "logs in $LOGS"
}

[[ $EUID -eq 0 ]] || die "run as root (libvirt's system instance, box build): sudo $0"

# --- 1. host side -----------------------------------------------------------------

ensure_host_packages() {
  local pkg missing=()
  for pkg in vagrant vagrant-libvirt libvirt-daemon-system libvirt-clients qemu-system-x86 \
    qemu-utils dnsmasq-base rsync curl; do
    [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) == "install ok installed" ]] || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  say "installing ${missing[*]} with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

libvirt_answers() { virsh -c qemu:///system version >/dev/null 2>&1; }

ensure_libvirtd() {
  if [[ -d /run/systemd/system ]]; then
    systemctl start virtlogd.socket libvirtd.service
  elif ! libvirt_answers; then
    # No systemd (a container or a bare CI VM): the daemons by hand.
    pgrep -x virtlogd >/dev/null || virtlogd -d
    pgrep -x libvirtd >/dev/null || libvirtd -d
  fi
  local i
  for i in $(seq 1 30); do
    libvirt_answers && break
    ((i < 30)) || die "libvirtd does not answer on qemu:///system"
    sleep 1
  done
  if ! virsh -q net-info default >/dev/null 2>&1; then
    say "libvirt has no network 'default' (package libvirt-daemon-config-network); vagrant-libvirt makes its own"
  elif [[ $(virsh net-info default | awk '/^Active:/ {print $2}') != yes ]]; then
    virsh -q net-start default >/dev/null
  fi
}

# ensure_kvm_access: libvirt runs qemu as libvirt-qemu (group kvm), which
# udev lets use /dev/kvm. Without udev (no systemd) /dev/kvm may be root-only
# and the domain fails with "Could not access KVM kernel module". An ACL for
# that one user adds access without changing anyone else's.
ensure_kvm_access() {
  [[ -c /dev/kvm ]] || die "FLOCK_VM_LIBVIRT_DRIVER=kvm but there is no /dev/kvm"
  id libvirt-qemu >/dev/null 2>&1 || return 0
  runuser -u libvirt-qemu -- test -r /dev/kvm -a -w /dev/kvm && return 0
  if ! command -v setfacl >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends acl >/dev/null
  fi
  say "giving libvirt-qemu access to /dev/kvm (ACL), as udev would"
  setfacl -m u:libvirt-qemu:rw /dev/kvm
  runuser -u libvirt-qemu -- test -r /dev/kvm -a -w /dev/kvm || die "libvirt-qemu cannot use /dev/kvm"
}

# hardware_kvm: the same test as the Vagrantfile's default.
hardware_kvm() {
  [[ -c /dev/kvm && (-d /sys/module/kvm_intel || -d /sys/module/kvm_amd) ]]
}

# The management network must not collide with anything routed on the host
# (Docker's networks, the e2e subnets) except its own bridge from a past run.
check_network() {
  local net=$FLOCK_VM_LIBVIRT_NETWORK dest dev
  for dest in 10.210.0.0/16 10.211.0.0/16; do
    ! cidr_overlap "$net" "$dest" || die "FLOCK_VM_LIBVIRT_NETWORK $net overlaps the flock's subnets $dest"
  done
  while read -r dest dev; do
    [[ $dest == */* ]] || continue
    if cidr_overlap "$net" "$dest"; then
      virsh net-info "flock-vm-$(cut -d. -f1-3 <<<"$net" | tr . -)" 2>/dev/null | grep -q "Bridge: *$dev\$" ||
        die "FLOCK_VM_LIBVIRT_NETWORK $net overlaps the host route $dest on $dev; pick another /24"
    fi
  done < <(ip -4 route show | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $1, $(i + 1)}')
}

check_ports() {
  local port
  for port in "$FLOCK_VM_BUS_PORT" "$FLOCK_VM_MONITOR_PORT"; do
    ! ss -Hltn "sport = :$port" | grep -q . || die "host port $port is in use; set FLOCK_VM_BUS_PORT / FLOCK_VM_MONITOR_PORT"
  done
}

# --- the VM ---------------------------------------------------------------------------

vagrant_cmd() { vagrant "$@"; }

# destroy_vm LABEL
destroy_vm() {
  # Vagrant keeps the machine directory after a destroy; the id is the VM.
  [[ -s $VAGRANT_DOTFILE_PATH/machines/default/libvirt/id ]] || return 0
  local t0
  t0=$(date +%s)
  vagrant_cmd destroy -f >>"$LOGS/destroy.log" 2>&1 || say "vagrant destroy failed (see $LOGS/destroy.log)"
  timed "$1" "$(($(date +%s) - t0))"
}

on_exit() {
  local rc=$?
  trap - EXIT
  if [[ $KEEP == 1 ]]; then
    say "FLOCK_VM_TEST_KEEP=1: the VM stays (VAGRANT_CWD=$VAGRANT_CWD VAGRANT_DOTFILE_PATH=$VAGRANT_DOTFILE_PATH vagrant destroy -f)"
  else
    destroy_vm "vagrant destroy"
  fi
  summary
  if ((rc == 0)); then say PASS; else say "FAIL (exit $rc)"; fi
  exit "$rc"
}

# stamp_lines: prefix each line with the seconds since the epoch, so one
# `vagrant up` can be split into boot and provisioning times afterwards.
stamp_lines() {
  local line
  while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done
}

# provision_summary LOG: "N changed, M unchanged, K skipped" from the last run.
provision_summary() {
  grep -oE 'provision: done: [0-9]+ changed, [0-9]+ unchanged, [0-9]+ skipped' "$1" | tail -n1 | sed 's/^provision: done: //'
}

in_vm() { vagrant_cmd ssh --no-tty -c "$1"; }

main() {
  ensure_host_packages
  ensure_libvirtd
  if [[ -z ${FLOCK_VM_LIBVIRT_DRIVER:-} ]]; then
    if hardware_kvm; then FLOCK_VM_LIBVIRT_DRIVER=kvm; else FLOCK_VM_LIBVIRT_DRIVER=qemu; fi
  fi
  export FLOCK_VM_LIBVIRT_DRIVER
  case $FLOCK_VM_LIBVIRT_DRIVER in
    kvm)
      say "domain type kvm$(hardware_kvm && echo ' (hardware virtualization)' || echo ': forced, but this host has no hardware KVM')"
      ensure_kvm_access
      ;;
    qemu) say "domain type qemu: software emulation (TCG)$(hardware_kvm || echo ', no hardware KVM on this host')" ;;
    *) die "FLOCK_VM_LIBVIRT_DRIVER must be kvm or qemu" ;;
  esac
  check_network
  check_ports
  trap on_exit EXIT
  # Interrupted too: leave no VM behind.
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # A machine left by an interrupted run would make `vagrant up` reuse it.
  destroy_vm "vagrant destroy (left from an earlier run)"

  local t0 t_prov t_end out changed
  t0=$(date +%s)
  bash "$ROOT/tests/vm/build-box.sh" 2>&1 | tee "$LOGS/build-box.log" | sed 's/^/  /'
  if grep -q 'cache hit' "$LOGS/build-box.log"; then
    timed "box (cache hit)" "$(($(date +%s) - t0))"
  else
    timed "box build" "$(($(date +%s) - t0))"
  fi

  say "vagrant up --provider libvirt (log: $LOGS/up.log)"
  t0=$(date +%s)
  if ! vagrant_cmd up --provider libvirt 2>&1 | stamp_lines >"$LOGS/up.log"; then
    tail -n 40 "$LOGS/up.log" | cut -d' ' -f2- | sed 's/^/  | /'
    die "vagrant up failed"
  fi
  t_end=$(date +%s)
  # The provisioner starts once the VM is up, reachable over SSH and synced.
  t_prov=$(awk '/Running provisioner: flock/ {print $1; exit}' "$LOGS/up.log")
  [[ -n $t_prov ]] || die "vagrant up did not run the flock provisioner (see $LOGS/up.log)"
  timed "first boot (up until ssh + rsync)" "$((t_prov - t0))"
  timed "first provisioning" "$((t_end - t_prov))"
  out=$(provision_summary "$LOGS/up.log")
  [[ -n $out ]] || die "the first provisioning printed no summary line (see $LOGS/up.log)"
  say "first provisioning: $out"

  say "vagrant provision (again: must change nothing)"
  t0=$(date +%s)
  vagrant_cmd provision >"$LOGS/provision2.log" 2>&1 || {
    tail -n 40 "$LOGS/provision2.log" | sed 's/^/  | /'
    die "the second vagrant provision failed"
  }
  timed "second provisioning" "$(($(date +%s) - t0))"
  out=$(provision_summary "$LOGS/provision2.log")
  say "second provisioning: $out"
  changed=${out%% changed*}
  if [[ $changed != 0 ]]; then
    grep 'changed:' "$LOGS/provision2.log" | sed 's/^/  | /'
    die "the second provisioning is not idempotent: $out"
  fi

  say "verify-vm.sh (image $VERIFY_IMAGE built in the VM, FROM scratch)"
  t0=$(date +%s)
  in_vm "sudo /vagrant/tests/vm/fixtures.sh $VERIFY_IMAGE" >"$LOGS/fixtures.log" 2>&1 || {
    sed 's/^/  | /' "$LOGS/fixtures.log"
    die "preparing the verify image and the monitoring stand-in failed"
  }
  local rc=0
  in_vm "sudo FLOCK_VERIFY_IMAGE=$VERIFY_IMAGE /vagrant/provision/verify-vm.sh" >"$LOGS/verify.log" 2>&1 || rc=$?
  sed 's/^/  /' "$LOGS/verify.log"
  # Through Vagrant's forwarded port: host 127.0.0.1:18222 -> the VM's
  # address -> the forwarded-port bridge -> 127.0.0.1:8222 in the VM.
  if curl -fsS -m 10 -o /dev/null "http://127.0.0.1:$FLOCK_VM_MONITOR_PORT/healthz"; then
    say "PASS: host 127.0.0.1:$FLOCK_VM_MONITOR_PORT reaches the VM's monitoring port through the forwarded port"
  else
    say "FAIL: host 127.0.0.1:$FLOCK_VM_MONITOR_PORT does not reach the VM's monitoring port"
    rc=1
  fi
  timed "verify" "$(($(date +%s) - t0))"
  ((rc == 0)) || die "verify-vm.sh failed"
  ! grep -q '^SKIP:' "$LOGS/verify.log" || die "verify-vm.sh skipped checks: $(grep -c '^SKIP:' "$LOGS/verify.log")"

  # The stand-in leaves the monitoring port to the bus.
  in_vm "docker rm -f flock-verify-monitor" >/dev/null
  deploy_flock
}

# deploy_flock: the dev stack into the VM's engine from this host through
# docker:host ssh://vagrant@flock-vm, the isolation probes in the VM, then
# the flock taken down (tests/vm/vmflock).
deploy_flock() {
  local dir=$LOGS/ssh t0
  mkdir -p "$dir"
  vagrant_cmd ssh-config --host flock-vm >"$dir/config"
  # The docker CLI and the host steps run the ssh on PATH with the login of
  # docker:host; this one finds the VM as a user's ~/.ssh/config would
  # (README: vagrant ssh-config >> ~/.ssh/config).
  printf '#!/bin/sh\nexec /usr/bin/ssh -F %q "$@"\n' "$dir/config" >"$dir/ssh"
  chmod 0755 "$dir/ssh"
  say "the dev flock into the VM from the host (docker:host ssh://vagrant@flock-vm), probes in the VM (log: $LOGS/flock.log)"
  t0=$(date +%s)
  if ! PATH="$dir:$PATH" go run ./tests/vm/vmflock -ssh-config "$dir/config" -host flock-vm \
    -bus-url "nats://127.0.0.1:$FLOCK_VM_BUS_PORT" -monitor-url "http://127.0.0.1:$FLOCK_VM_MONITOR_PORT" \
    >"$LOGS/flock.log" 2>&1; then
    grep -E '^vmflock|^--- FAIL|_test.go:[0-9]+:' "$LOGS/flock.log" | tail -n 40 | sed 's/^/  | /'
    die "the flock in the VM failed (see $LOGS/flock.log)"
  fi
  grep -E '^vmflock|^--- PASS' "$LOGS/flock.log" | sed 's/^/  /'
  timed "flock: deploy, probes, destroy" "$(($(date +%s) - t0))"
}

main "$@"
