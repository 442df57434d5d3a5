#!/usr/bin/env bash
# make check: every suite, as CI runs it. The VM test runs beside the others:
# it boots its own VM (under software emulation when the host has no KVM,
# mostly waiting on that one QEMU process), forwards its own host ports
# (14222, 18222) and builds its images in the VM's engine, so it shares
# nothing with the Docker suites but the CPU, where it runs at a lower
# priority (nice 10) so their timings hold. The other suites run one after
# another (e2e-cluster publishes the bus's host ports, as e2e does).
# A failure stops the rest; the VM is then taken down (its own exit trap).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
logs=$(mktemp -d "${TMPDIR:-/tmp}/flock-check.XXXXXX")
start=$(date +%s)

step() {
  local t0 rc=0
  t0=$(date +%s)
  echo "check: $*"
  "$@" || rc=$?
  echo "check: $* ended (exit $rc) in $(($(date +%s) - t0)) s"
  return "$rc"
}

vm_pid=
vm_done() {
  [[ -n $vm_pid ]] || return 0
  local rc=0
  wait "$vm_pid" || rc=$?
  vm_pid=
  echo "check: the VM test (ran beside the others; its log follows)"
  sed 's/^/  vm-test | /' "$logs/vm-test.log"
  return "$rc"
}
# shellcheck disable=SC2317 # called by the EXIT trap
stop_vm() {
  local rc=$?
  if [[ -n $vm_pid ]]; then
    # Its trap takes the VM down; wait for that, then show why it ended.
    kill -TERM -- "-$vm_pid" 2>/dev/null || true
    vm_done || true
  fi
  exit "$rc"
}
trap stop_vm EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# setsid: its own process group, so a stop reaches vagrant and QEMU's
# helpers too; its output goes to a log shown whole at the end.
setsid nice -n 10 "$MAKE" --no-print-directory vm-test >"$logs/vm-test.log" 2>&1 &
vm_pid=$!

step env FLOCK_E2E=1 "$GO" test -count=1 -timeout 30m ./...
step "$MAKE" --no-print-directory e2e-cluster
step "$MAKE" --no-print-directory e2e-fargate
step "$MAKE" --no-print-directory e2e-gvisor
step "$MAKE" --no-print-directory bench-replay
step "$MAKE" --no-print-directory provision-check
step "$MAKE" --no-print-directory actionlint
echo "check: the suites beside the VM test ended in $(($(date +%s) - start)) s; waiting for the VM test"
vm_rc=0
vm_done || vm_rc=$?
echo "check: everything ended in $(($(date +%s) - start)) s (the VM test: exit $vm_rc)"
exit "$vm_rc"
