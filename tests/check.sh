#!/usr/bin/env bash
# make check: every suite, as CI runs it, one after another, each with the
# time it took. The VM test comes last and runs alone: run beside the Docker
# suites (it shares only the CPU with them) its software-emulated guest's
# CPU-limit probe measured 1.17 cores against a bound of 1.00, so its
# timing-bound probes need the machine to themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
start=$(date +%s)

step() {
  local t0 rc=0
  t0=$(date +%s)
  echo "check: $*"
  "$@" || rc=$?
  echo "check: $* ended (exit $rc) in $(($(date +%s) - t0)) s"
  return "$rc"
}

step env FLOCK_E2E=1 "$GO" test -count=1 -timeout 30m ./...
step "$MAKE" --no-print-directory e2e-cluster
step "$MAKE" --no-print-directory e2e-fargate
step "$MAKE" --no-print-directory e2e-gvisor
step "$MAKE" --no-print-directory bench-replay
step "$MAKE" --no-print-directory provision-check
step "$MAKE" --no-print-directory actionlint
step "$MAKE" --no-print-directory vm-test
echo "check: everything ended in $(($(date +%s) - start)) s"
