#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Checks on a real, provisioned VM what the CI container test cannot: dockerd
# running under systemd with the hardened daemon.json, containers actually
# getting those defaults, gVisor actually running a container, the
# forwarded-port bridges listening.
#
#   vagrant ssh -c 'sudo /vagrant/provision/verify-vm.sh'
#
# Container checks pull FLOCK_VERIFY_IMAGE (default busybox:1.36) if it is not
# present; without registry access they are reported as SKIP.
# Prints PASS/FAIL/SKIP per check and "N passed, M failed, K skipped"; exits 1
# on failure.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/checks.sh"

: "${FLOCK_VERIFY_IMAGE:=busybox:1.36}"
: "${FLOCK_ROOT:=/srv/flock}"
: "${FLOCK_USER:=vagrant}"
: "${FLOCK_FORWARD_PORTS:=4222 8222}"

check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@" >/dev/null 2>&1; then pass "$name"; else fail "$name"; fi
}

[[ $EUID -eq 0 ]] || {
  echo "run as root: sudo $0" >&2
  exit 2
}

check "systemd is PID 1" test -d /run/systemd/system
check "docker.service enabled" systemctl is-enabled --quiet docker.service
check "docker.service active" systemctl is-active --quiet docker.service
check "docker answers" docker info

info() { docker info --format "$1" 2>/dev/null; }
# cidr_within NET POOL: NET lies inside POOL (both IPv4 CIDRs).
cidr_within() {
  local n np p pp
  n=$(ipv4_to_int "${1%/*}") np=${1#*/} p=$(ipv4_to_int "${2%/*}") pp=${2#*/}
  ((np >= pp && (n >> (32 - pp)) == (p >> (32 - pp))))
}

# AppArmor (CIS Docker Benchmark 5.1): the kernel has it on, and dockerd uses it.
expect "AppArmor enabled in the kernel" "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" Y
expect "docker info lists the apparmor security option" \
  "$(info '{{json .SecurityOptions}}' | grep -c 'name=apparmor')" 1
expect "daemon log driver" "$(info '{{.LoggingDriver}}')" json-file
expect "daemon live-restore" "$(info '{{.LiveRestoreEnabled}}')" true
if [[ -n $(jq -r '."userns-remap" // empty' /etc/docker/daemon.json) ]]; then
  expect "userns-remap active" "$(info '{{json .SecurityOptions}}' | grep -c 'name=userns')" 1
fi
expect "default bridge icc" \
  "$(docker network inspect bridge --format '{{index .Options "com.docker.network.bridge.enable_icc"}}')" false
expect "docker-proxy processes (userland-proxy off)" "$(pgrep -xc docker-proxy || true)" 0

# default-address-pools: a network without an explicit subnet comes from the pool.
pool=$(jq -r '."default-address-pools"[0].base' /etc/docker/daemon.json)
net=flock-verify-$$
if docker network create "$net" >/dev/null 2>&1; then
  subnet=$(docker network inspect "$net" --format '{{(index .IPAM.Config 0).Subnet}}')
  docker network rm "$net" >/dev/null
  check "new networks get subnets from $pool ($subnet)" cidr_within "$subnet" "$pool"
else
  fail "docker network create"
fi

expect "$FLOCK_USER in group docker" "$(id -nG "$FLOCK_USER" 2>/dev/null | tr ' ' '\n' | grep -cx docker)" 1
for d in shared/agents:711 shared/logs:711 shared/common:755 state:711; do
  expect "$FLOCK_ROOT/${d%%:*} mode and owner" "$(stat -c '%a %U' "$FLOCK_ROOT/${d%%:*}" 2>/dev/null)" "${d##*:} root"
done
for port in $FLOCK_FORWARD_PORTS; do
  check "forwarded-port bridge for $port listening" systemctl is-active --quiet "flock-forward-$port.socket"
done
# End to end, once the flock runs: the monitoring port answers on loopback,
# and the same through the bridge on the NAT address (what Vagrant forwards to).
nat=$(ip -4 -o route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}')
if curl -fsS -m 5 -o /dev/null http://127.0.0.1:8222/healthz 2>/dev/null; then
  check "NATS monitoring reachable through the bridge on $nat:8222" curl -fsS -m 5 -o /dev/null "http://$nat:8222/healthz"
else
  skip "bridge end to end: nothing answers on 127.0.0.1:8222 yet (deploy the flock, then re-run)"
fi
if command -v go >/dev/null; then check "go runs" go version; fi
if command -v pulumi >/dev/null; then check "pulumi runs" env PULUMI_SKIP_UPDATE_CHECK=true pulumi version; fi

if docker image inspect "$FLOCK_VERIFY_IMAGE" >/dev/null 2>&1 || docker pull -q "$FLOCK_VERIFY_IMAGE" >/dev/null 2>&1; then
  expect "containers start with no-new-privileges" \
    "$(docker run --rm "$FLOCK_VERIFY_IMAGE" grep NoNewPrivs /proc/self/status | awk '{print $2}')" 1
  cid=$(docker create "$FLOCK_VERIFY_IMAGE" true)
  expect "containers get the log max-size" \
    "$(docker inspect "$cid" --format '{{index .HostConfig.LogConfig.Config "max-size"}}')" \
    "$(jq -r '."log-opts"."max-size"' /etc/docker/daemon.json)"
  docker rm "$cid" >/dev/null
  # The container's own view of its confinement, and what dockerd recorded.
  cid=$(docker create "$FLOCK_VERIFY_IMAGE" cat /proc/self/attr/current)
  expect "containers run under AppArmor profile docker-default, enforced" \
    "$(docker start -a "$cid" 2>&1 | tr -d '\0')" "docker-default (enforce)"
  expect "docker inspect: AppArmorProfile docker-default" \
    "$(docker inspect "$cid" --format '{{.AppArmorProfile}}')" docker-default
  docker rm "$cid" >/dev/null
  if info '{{json .Runtimes}}' | grep -q '"runsc"'; then
    # gVisor's own kernel log proves the sandbox; the default bridge network
    # proves the --network=host registration lets networked containers start.
    expect "gVisor (runsc) runs a networked container" \
      "$(docker run --rm --runtime=runsc "$FLOCK_VERIFY_IMAGE" dmesg 2>/dev/null | grep -ci gvisor | sed 's/^[1-9][0-9]*$/yes/')" yes
  else
    skip "gVisor: runtime runsc not registered (provisioned without FLOCK_GVISOR=1)"
  fi
else
  skip "container checks: cannot pull $FLOCK_VERIFY_IMAGE (no registry access?)"
fi

printf '%d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
[[ $failed -eq 0 ]]
