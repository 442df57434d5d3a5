#!/usr/bin/env bash
# shellcheck disable=SC2034 # the counts are read by the sourcing scripts
# The PASS/FAIL/SKIP lines of the scripts that check provisioning (sourced,
# not run): provision/verify-vm.sh on a VM, tests/provision/run.sh in CI.
# Each check prints one line and is counted in passed, failed or skipped.

passed=0
failed=0
skipped=0

pass() {
  passed=$((passed + 1))
  printf 'PASS: %s\n' "$*"
}
fail() {
  failed=$((failed + 1))
  printf 'FAIL: %s\n' "$*"
}
skip() {
  skipped=$((skipped + 1))
  printf 'SKIP: %s\n' "$*"
}
# expect NAME ACTUAL WANTED
expect() {
  if [[ $2 == "$3" ]]; then pass "$1"; else fail "$1 (got '$2', want '$3')"; fi
}
