#!/usr/bin/env bash
# Single-quoted $... below is meant for the container's shell, jq or dpkg-query.
# shellcheck disable=SC2016
# Tests for the Vagrantfile and provision/. Run as root on Debian:
#
#   bash tests/provision/run.sh
#
# 1. shellcheck on every shell script in provision/, tests/ and .ci/
# 2. ruby -c Vagrantfile, plus tests/provision/vagrantfile_test.rb (every
#    provider block under several host environments), plus `vagrant validate`
#    (Debian bookworm ships vagrant 2.3.4; installed if missing)
# 3. provision/provision.sh run inside a container made from a Debian bookworm
#    root filesystem built with debootstrap (no image pulls), without systemd,
#    with FLOCK_SKIP_GO=1 FLOCK_SKIP_PULUMI=1 (no internet for the official
#    archives): twice with defaults (second run must change nothing), with
#    gVisor + userns-remap and back, failure paths, merging of admin keys, and
#    the Go / Pulumi install path from local archives.
#
# Missing tools are installed with apt-get (shellcheck, ruby, vagrant,
# debootstrap). Without Docker or debootstrap the container part is skipped,
# unless FLOCK_REQUIRE_DOCKER=1, which turns that into a failure.
# The bookworm image is kept (FLOCK_TEST_IMAGE) and its tarball cached
# (FLOCK_TEST_CACHE); FLOCK_TEST_REBUILD=1 rebuilds both.
#
# Output: one PASS/FAIL/SKIP line per check, then "N passed, M failed".
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
IMAGE=${FLOCK_TEST_IMAGE:-flock-provision-test:bookworm}
CACHE=${FLOCK_TEST_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/flock-provision-test}
MIRROR=${FLOCK_TEST_MIRROR:-http://deb.debian.org/debian}
REQUIRE_DOCKER=${FLOCK_REQUIRE_DOCKER:-0}
# The flock's own agent subnet pool (infra/flock: DefaultNetwork).
AGENT_POOL=10.210.0.0/16

# shellcheck source=provision/lib/checks.sh
. "$ROOT/provision/lib/checks.sh"
WORK=$(mktemp -d)
CONTAINER=
T0=$(date +%s)

note() { printf '  .. %s\n' "$*"; }
# ok NAME COMMAND...: PASS if the command succeeds.
ok() {
  local name=$1
  shift
  if "$@" >"$WORK/ok.out" 2>&1; then
    pass "$name"
  else
    fail "$name"
    sed 's/^/     | /' "$WORK/ok.out" | tail -n 20
  fi
}
# missing_or_skip NAME REASON: a prerequisite of the container tests is absent.
missing_or_skip() {
  if [[ $REQUIRE_DOCKER == 1 ]]; then
    fail "$1: $2 (FLOCK_REQUIRE_DOCKER=1)"
  else
    skip "$1: $2"
  fi
}

cleanup() {
  [[ -n $CONTAINER ]] && docker rm -f "$CONTAINER" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

APT_UPDATED=0
# ensure_tool BINARY PACKAGE: install PACKAGE with apt-get if BINARY is missing.
ensure_tool() {
  command -v "$1" >/dev/null && return 0
  [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null || return 1
  if [[ $APT_UPDATED -eq 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || return 1
    APT_UPDATED=1
  fi
  note "installing $2 with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null 2>&1 || return 1
  command -v "$1" >/dev/null
}

# --- 1. shellcheck -------------------------------------------------------------

echo "== shellcheck"
if ensure_tool shellcheck shellcheck; then
  mapfile -t scripts < <(
    cd "$ROOT" && git ls-files provision tests .ci | sort | while read -r f; do
      if [[ $f == *.sh ]] || head -n1 "$f" | grep -Eq '^#!.*(ba)?sh'; then echo "$f"; fi
    done
  )
  if ((${#scripts[@]} == 0)); then
    fail "shellcheck: no shell scripts found under provision/, tests/ and .ci/"
  fi
  for f in "${scripts[@]}"; do
    ok "shellcheck $f" bash -c 'cd "$1" && shellcheck -x "$2"' _ "$ROOT" "$f"
  done
else
  fail "shellcheck available (apt-get install shellcheck failed)"
fi

# --- 2. Vagrantfile --------------------------------------------------------------

echo "== Vagrantfile"
if ensure_tool ruby ruby; then
  ok "ruby -c Vagrantfile" ruby -c "$ROOT/Vagrantfile"
  while IFS= read -r line; do
    case "$line" in
      PASS:*) pass "${line#PASS: }" ;;
      FAIL:*) fail "${line#FAIL: }" ;;
      *) [[ -n $line ]] && note "$line" ;;
    esac
  done < <(ruby "$ROOT/tests/provision/vagrantfile_test.rb" "$ROOT/Vagrantfile" 2>&1)
else
  fail "ruby available (apt-get install ruby failed)"
fi
if ensure_tool vagrant vagrant; then
  # In a scratch copy: vagrant writes .vagrant/ next to the Vagrantfile.
  mkdir -p "$WORK/vagrant/home"
  cp "$ROOT/Vagrantfile" "$WORK/vagrant/"
  ok "vagrant validate --ignore-provider ($(vagrant --version 2>/dev/null))" \
    env VAGRANT_CWD="$WORK/vagrant" VAGRANT_HOME="$WORK/vagrant/home" VAGRANT_CHECKPOINT_DISABLE=1 \
    vagrant validate --ignore-provider
  skip "vagrant validate of the provider blocks: needs VirtualBox, Parallels or a running libvirtd (vagrantfile_test.rb checks those blocks instead)"
else
  skip "vagrant validate: no vagrant binary and it could not be installed (Debian bookworm has package vagrant)"
fi

# --- 3. provisioning in a debootstrapped Debian container ---------------------

echo "== provision/provision.sh in a Debian bookworm container (no systemd)"

build_image() {
  local tarball=$CACHE/bookworm-minbase.tar rootfs
  if [[ ${FLOCK_TEST_REBUILD:-0} == 1 ]]; then
    docker image rm -f "$IMAGE" >/dev/null 2>&1
    rm -f "$tarball"
  fi
  if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    note "reusing image $IMAGE"
    return 0
  fi
  if [[ ! -s $tarball ]]; then
    if ! ensure_tool debootstrap debootstrap; then
      missing_or_skip "container tests" "debootstrap is not available"
      return 1
    fi
    [[ $EUID -eq 0 ]] || {
      missing_or_skip "container tests" "debootstrap needs root"
      return 1
    }
    rootfs=$(mktemp -d /var/tmp/flock-bookworm.XXXXXX)
    note "debootstrap --variant=minbase bookworm ($MIRROR)"
    if ! debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
      fail "debootstrap bookworm"
      tail -n 20 "$WORK/debootstrap.log" | sed 's/^/     | /'
      rm -rf "$rootfs"
      return 1
    fi
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    mkdir -p "$CACHE"
    tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  note "docker import $tarball -> $IMAGE"
  docker import - "$IMAGE" <"$tarball" >/dev/null || {
    fail "docker import of the bookworm root filesystem"
    return 1
  }
}

# in_ct COMMAND...: run a command in the test container.
in_ct() { docker exec "$CONTAINER" "$@"; }

# provision LOG [VAR=VALUE...]: run provision.sh in the container; returns its status.
RUNS=0
provision() {
  local log=$1 args=()
  shift
  for kv in "$@"; do args+=(-e "$kv"); done
  RUNS=$((RUNS + 1))
  docker exec "${args[@]}" "$CONTAINER" bash /opt/flock-provision/provision.sh >"$WORK/$log" 2>&1
}
show_log() { tail -n "${2:-25}" "$WORK/$1" | sed 's/^/     | /'; }
count() { grep -c "$1" "$WORK/$2"; }
daemon_json() { in_ct jq -cS "$1" /etc/docker/daemon.json; }
jq_true() { in_ct jq -e "$1" /etc/docker/daemon.json >/dev/null 2>&1; }
# snapshot: everything provisioning manages, with modes, owners and checksums.
snapshot() {
  in_ct bash -c '
    find /etc/docker /srv/flock /etc/systemd/system /usr/local/bin /usr/local/go /opt/pulumi \
      -maxdepth 2 -printf "%p %m %u:%g %y %l\n" 2>/dev/null | sort
    find /etc/docker /etc/systemd/system -type f -exec sha256sum {} + 2>/dev/null | sort
    getent group docker
    dpkg-query -W -f="\${Package} \${Version} \${Status}\n" | sort' >"$WORK/$1"
}
ipv4_int() {
  local IFS=. a b c d
  read -r a b c d <<<"$1"
  echo $(((a << 24) | (b << 16) | (c << 8) | d))
}
# disjoint A/N B/M: the two IPv4 networks share no address.
disjoint() {
  local as ae bs be
  as=$(ipv4_int "${1%/*}") bs=$(ipv4_int "${2%/*}")
  ae=$((as + (1 << (32 - ${1#*/})) - 1)) be=$((bs + (1 << (32 - ${2#*/})) - 1))
  ((ae < bs || be < as))
}

hardening_checks() { # hardening_checks LABEL
  local label=$1
  expect "$label: log-driver" "$(daemon_json '."log-driver"')" '"json-file"'
  expect "$label: log-opts max-size/max-file" "$(daemon_json '."log-opts" | {"max-size", "max-file"}')" '{"max-file":"3","max-size":"10m"}'
  expect "$label: live-restore" "$(daemon_json '."live-restore"')" true
  expect "$label: no-new-privileges" "$(daemon_json '."no-new-privileges"')" true
  expect "$label: userland-proxy" "$(daemon_json '."userland-proxy"')" false
  expect "$label: icc" "$(daemon_json '.icc')" false
  local pools bad=0 n=0 base size
  pools=$(in_ct jq -r '."default-address-pools"[] | "\(.base) \(.size)"' /etc/docker/daemon.json)
  while read -r base size; do
    [[ -n $base ]] || continue
    n=$((n + 1))
    disjoint "$base" "$AGENT_POOL" || bad=1
    ((size >= ${base#*/} && size <= 29)) || bad=1
  done <<<"$pools"
  if ((n > 0 && bad == 0)); then
    pass "$label: default-address-pools ($(echo "$pools" | sed 's/ / size \//' | paste -sd,)) disjoint from $AGENT_POOL"
  else
    fail "$label: default-address-pools ($(echo "$pools" | paste -sd,)) must exist and not overlap $AGENT_POOL"
  fi
}

container_tests() {
  if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
    missing_or_skip "container tests" "no Docker engine answers"
    return 0
  fi
  build_image || return 0
  CONTAINER=flock-provision-test-$$
  if ! docker run -d --name "$CONTAINER" --label flock-provision-test=1 "$IMAGE" sleep infinity >/dev/null; then
    fail "start a container from $IMAGE"
    CONTAINER=
    return 0
  fi
  in_ct useradd -m -s /bin/bash vagrant
  docker cp "$ROOT/provision" "$CONTAINER:/opt/flock-provision" >/dev/null
  local base_env=(FLOCK_SKIP_GO=1 FLOCK_SKIP_PULUMI=1) ip
  ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$CONTAINER")
  note "FLOCK_SKIP_GO=1 FLOCK_SKIP_PULUMI=1 for every run below unless stated: no internet for the official archives"

  # Run 1 and 2: defaults.
  if provision run1.log "${base_env[@]}"; then
    pass "run 1 (defaults) succeeds"
  else
    fail "run 1 (defaults) succeeds"
    show_log run1.log
    return 0
  fi
  snapshot snap1
  hardening_checks "daemon.json"
  expect "daemon.json: no userns-remap by default" "$(daemon_json 'has("userns-remap")')" false
  expect "daemon.json: no runsc runtime by default" "$(daemon_json '.runtimes.runsc')" null
  expect "daemon.json: mode/owner" "$(in_ct stat -c '%a %U:%G' /etc/docker/daemon.json)" "644 root:root"
  local pkg
  for pkg in docker.io jq ca-certificates curl iptables; do
    expect "package $pkg installed" "$(in_ct dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" "install ok installed"
  done
  local d
  for d in "/srv/flock 755" "/srv/flock/shared 755" "/srv/flock/shared/agents 711" \
    "/srv/flock/shared/common 755" "/srv/flock/shared/logs 711" "/srv/flock/state 711"; do
    expect "dir ${d% *} mode ${d#* } root:root" "$(in_ct stat -c '%a %U:%G' "${d% *}" 2>&1)" "${d#* } root:root"
  done
  expect "user vagrant in group docker" "$(in_ct id -nG vagrant | tr ' ' '\n' | grep -cx docker)" 1
  expect "forwarded-port bridge socket for 4222 listens on the NAT address" \
    "$(in_ct grep -h '^ListenStream=' /etc/systemd/system/flock-forward-4222.socket)" "ListenStream=$ip:4222"
  expect "forwarded-port bridge relays 8222 to 127.0.0.1 only" \
    "$(in_ct grep -h '^ExecStart=' /etc/systemd/system/flock-forward-8222.service)" \
    "ExecStart=/usr/lib/systemd/systemd-socket-proxyd 127.0.0.1:8222"
  expect "boot-time mount of the agents' filesystems installed" \
    "$(in_ct stat -c '%a %U' /usr/local/sbin/flock-mount-disks) $(in_ct sh -n /usr/local/sbin/flock-mount-disks && echo parses)" "755 root parses"
  expect "flock-disks.service mounts them before Docker starts the agents" \
    "$(in_ct grep -hE '^(Before|ExecStart)=' /etc/systemd/system/flock-disks.service | paste -sd' ')" \
    "Before=docker.service ExecStart=/usr/local/sbin/flock-mount-disks /srv/flock/state"
  expect "no daemon started without systemd (no dockerd/containerd process)" \
    "$(in_ct bash -c 'cat /proc/[0-9]*/comm 2>/dev/null | grep -cE "^(dockerd|containerd)$"')" 0
  expect "says it skipped the service (re)start" \
    "$(count '^skipped: docker service start/restart (systemd is not running' run1.log)" 1
  expect "temporary policy-rc.d removed again" "$(in_ct bash -c 'test -e /usr/sbin/policy-rc.d && echo present || echo absent')" absent
  in_ct cp /etc/docker/daemon.json /tmp/daemon-default.json

  if provision run2.log "${base_env[@]}"; then
    pass "run 2 (defaults again) succeeds"
  else
    fail "run 2 (defaults again) succeeds"
    show_log run2.log
  fi
  snapshot snap2
  expect "run 2 prints no 'changed:' line" "$(count '^changed:' run2.log)" 0
  local n_unchanged
  n_unchanged=$(count '^unchanged:' run2.log)
  if ((n_unchanged >= 15)); then pass "run 2 reports $n_unchanged 'unchanged:' items"; else fail "run 2 reports 'unchanged:' items (got $n_unchanged)"; fi
  if cmp -s "$WORK/snap1" "$WORK/snap2"; then
    pass "run 2 leaves /etc/docker, /srv/flock, units, group and packages byte-identical"
  else
    fail "run 2 leaves /etc/docker, /srv/flock, units, group and packages byte-identical"
    diff "$WORK/snap1" "$WORK/snap2" | head -n 20 | sed 's/^/     | /'
  fi

  # gVisor + userns-remap, twice, then back to the defaults.
  if in_ct bash -c 'apt-cache policy runsc | grep -q "Candidate: [0-9]"'; then
    note "bookworm has package runsc: testing FLOCK_GVISOR=1 with it"
  fi
  if provision run3.log "${base_env[@]}" FLOCK_GVISOR=1 FLOCK_USERNS_REMAP=1; then
    pass "run 3 (FLOCK_GVISOR=1 FLOCK_USERNS_REMAP=1) succeeds"
  else
    fail "run 3 (FLOCK_GVISOR=1 FLOCK_USERNS_REMAP=1) succeeds"
    show_log run3.log
  fi
  expect "gVisor: package runsc installed" "$(in_ct dpkg-query -W -f='${Status}' runsc 2>/dev/null)" "install ok installed"
  expect "gVisor: runtime runsc registered with --network=host" \
    "$(daemon_json '.runtimes.runsc')" '{"path":"/usr/bin/runsc","runtimeArgs":["--network=host"]}'
  expect "gVisor: default runtime stays runc (agents opt in via flock:runtime)" "$(daemon_json '."default-runtime"')" null
  expect "userns-remap: default" "$(daemon_json '."userns-remap"')" '"default"'
  hardening_checks "daemon.json with gVisor + userns-remap"
  in_ct cp /etc/docker/daemon.json /tmp/daemon-gvisor.json
  provision run3b.log "${base_env[@]}" FLOCK_GVISOR=1 FLOCK_USERNS_REMAP=1
  expect "run 3 again: succeeds without any 'changed:' line" "$? $(count '^changed:' run3b.log)" "0 0"

  provision run4.log "${base_env[@]}"
  expect "back to defaults: succeeds" "$?" 0
  expect "back to defaults: daemon.json identical to run 1's" \
    "$(in_ct sha256sum /etc/docker/daemon.json | cut -d' ' -f1)" "$(in_ct sha256sum /tmp/daemon-default.json | cut -d' ' -f1)"

  # Failure paths: clear message, non-zero exit, daemon.json untouched.
  local before
  before=$(in_ct sha256sum /etc/docker/daemon.json)
  provision bad1.log "${base_env[@]}" FLOCK_GVISOR=1 FLOCK_RUNSC_PATH=/nonexistent/runsc
  expect "FLOCK_GVISOR=1 with a missing FLOCK_RUNSC_PATH fails with a message" \
    "$? $(count 'FLOCK_RUNSC_PATH=/nonexistent/runsc is not an executable' bad1.log)" "1 1"
  in_ct bash -c 'dpkg -r runsc >/dev/null 2>&1; printf "Package: runsc\nPin: release *\nPin-Priority: -1\n" >/etc/apt/preferences.d/hide-runsc'
  provision bad2.log "${base_env[@]}" FLOCK_GVISOR=1
  expect "FLOCK_GVISOR=1 where apt has no runsc package fails with a clear error" \
    "$? $(count "no 'runsc' package is available" bad2.log)" "1 1"
  in_ct rm -f /etc/apt/preferences.d/hide-runsc
  provision bad3.log "${base_env[@]}" FLOCK_DOCKER_POOL=10.208.0.0/12
  expect "an address pool overlapping $AGENT_POOL is refused" "$? $(count 'overlaps the flock' bad3.log)" "1 1"
  expect "failed runs leave daemon.json untouched" "$(in_ct sha256sum /etc/docker/daemon.json)" "$before"
  in_ct bash -c 'printf "{ not json" >/etc/docker/daemon.json'
  provision bad4.log "${base_env[@]}"
  expect "an invalid existing daemon.json is reported, not overwritten" \
    "$? $(count 'is not valid JSON' bad4.log) $(in_ct cat /etc/docker/daemon.json)" "1 1 { not json"

  # Keys an administrator added survive; ours are enforced.
  in_ct bash -c 'jq ". + {debug: true, \"log-level\": \"warn\", icc: true, \"log-opts\": {compress: \"true\", \"max-size\": \"1g\"}}" /tmp/daemon-default.json >/etc/docker/daemon.json'
  provision merge1.log "${base_env[@]}"
  expect "merge: admin keys kept, hardening keys enforced" \
    "$(daemon_json '{debug, "log-level", icc, "log-opts"}')" '{"debug":true,"icc":false,"log-level":"warn","log-opts":{"compress":"true","max-file":"3","max-size":"10m"}}'
  provision merge2.log "${base_env[@]}"
  expect "merge: re-run changes nothing" "$? $(count '^changed:' merge2.log)" "0 0"

  # Forwarded-port bridges follow FLOCK_FORWARD_PORTS.
  provision fwd1.log "${base_env[@]}" FLOCK_FORWARD_PORTS=4222
  expect "FLOCK_FORWARD_PORTS=4222 removes the 8222 bridge units" \
    "$? $(in_ct bash -c 'ls /etc/systemd/system/flock-forward-* | xargs -n1 basename | paste -sd,')" \
    "0 flock-forward-4222.service,flock-forward-4222.socket"
  provision fwd2.log "${base_env[@]}"
  expect "default FLOCK_FORWARD_PORTS brings them back" \
    "$? $(in_ct bash -c 'ls /etc/systemd/system/flock-forward-* | wc -l')" "0 4"

  pull_shared_tests
  toolchain_tests
  dockerd_tests
}

# provision/pull-shared.sh against the container's /srv/flock/shared, with a
# stand-in `vagrant` that runs the remote command in the container (no TTY,
# like the real `vagrant ssh --no-tty`, which the stub insists on).
pull_shared_tests() {
  mkdir -p "$WORK/bin"
  cat >"$WORK/bin/vagrant" <<'STUB'
#!/usr/bin/env bash
[[ $1 == ssh ]] || exit 2
shift
tty=1 cmd=
while (($#)); do
  case $1 in
    --no-tty) tty=0 ;;
    -c) cmd=$2; shift ;;
  esac
  shift
done
[[ $tty == 0 ]] || { echo "vagrant stub: a TTY would corrupt the tar stream" >&2; exit 3; }
exec docker exec -i "$FLOCK_TEST_CONTAINER" bash -c "sudo() { \"\$@\"; }; $cmd"
STUB
  chmod 755 "$WORK/bin/vagrant"
  in_ct bash -c '
    set -e
    install -d -o 10001 -g 10001 -m 700 /srv/flock/shared/agents/agent-1
    printf "a\r\nb\000c\377" >/srv/flock/shared/agents/agent-1/data.bin
    chown 10001:10001 /srv/flock/shared/agents/agent-1/data.bin
    chmod 600 /srv/flock/shared/agents/agent-1/data.bin
    install -o 10001 -g 10001 -m 600 /dev/null /srv/flock/shared/logs/agent-1.log
    echo hello >/srv/flock/shared/common/README'
  local want got dest=$WORK/pulled pull=("$ROOT/provision/pull-shared.sh")
  want=$(in_ct sha256sum /srv/flock/shared/agents/agent-1/data.bin | cut -d' ' -f1)
  PATH=$WORK/bin:$PATH FLOCK_TEST_CONTAINER=$CONTAINER "${pull[@]}" "$dest" >"$WORK/pull1.log" 2>&1
  got=$(sha256sum "$dest/agents/agent-1/data.bin" 2>/dev/null | cut -d' ' -f1)
  expect "pull-shared.sh: snapshot has agent files byte-identical, logs and common" \
    "$(count '^pull-shared: ' pull1.log) $got $(test -f "$dest/logs/agent-1.log" && cat "$dest/common/README")" "1 $want hello"
  expect "pull-shared.sh: files belong to the user who pulled" "$(stat -c %u "$dest/agents/agent-1/data.bin" 2>&1)" "$(id -u)"
  in_ct rm /srv/flock/shared/common/README
  PATH=$WORK/bin:$PATH FLOCK_TEST_CONTAINER=$CONTAINER FLOCK_PULL_PATH=logs "${pull[@]}" "$dest" >"$WORK/pull2.log" 2>&1
  expect "pull-shared.sh: FLOCK_PULL_PATH=logs replaces the snapshot with logs only" \
    "$? $(cd "$dest" && find . -mindepth 1 | sort | paste -sd,)" "0 ./.flock-shared-snapshot,./logs,./logs/agent-1.log"
  PATH=$WORK/bin:$PATH FLOCK_TEST_CONTAINER=$CONTAINER FLOCK_PULL_PATH=../../etc "${pull[@]}" "$dest" >"$WORK/pull3.log" 2>&1
  expect "pull-shared.sh: refuses a path outside the shared directory" "$? $(count "without '..'" pull3.log)" "1 1"
  mkdir -p "$WORK/precious"
  PATH=$WORK/bin:$PATH FLOCK_TEST_CONTAINER=$CONTAINER "${pull[@]}" "$WORK/precious" >"$WORK/pull4.log" 2>&1
  expect "pull-shared.sh: never replaces a directory that is not a snapshot" "$? $(count 'not an earlier snapshot' pull4.log)" "1 1"
}

# Go and Pulumi from local archives: the real download path needs internet,
# the checksum and install logic do not.
toolchain_tests() {
  local fake=$WORK/fake go_sha pulumi_sha
  mkdir -p "$fake/go/bin" "$fake/pulumi"
  printf 'go1.26.8\ntime 2026-01-01T00:00:00Z\n' >"$fake/go/VERSION"
  printf '#!/bin/sh\necho "go version go1.26.8 linux/$(dpkg --print-architecture)"\n' >"$fake/go/bin/go"
  printf '#!/bin/sh\nexit 0\n' >"$fake/go/bin/gofmt"
  printf '#!/bin/sh\necho v3.255.0\n' >"$fake/pulumi/pulumi"
  printf '#!/bin/sh\nexit 0\n' >"$fake/pulumi/pulumi-language-go"
  chmod 755 "$fake"/go/bin/* "$fake"/pulumi/*
  tar -C "$fake" -czf "$WORK/go.tar.gz" go
  tar -C "$fake" -czf "$WORK/pulumi.tar.gz" pulumi
  go_sha=$(sha256sum "$WORK/go.tar.gz" | cut -d' ' -f1)
  pulumi_sha=$(sha256sum "$WORK/pulumi.tar.gz" | cut -d' ' -f1)
  docker cp "$WORK/go.tar.gz" "$CONTAINER:/tmp/go.tar.gz" >/dev/null
  docker cp "$WORK/pulumi.tar.gz" "$CONTAINER:/tmp/pulumi.tar.gz" >/dev/null

  provision go1.log FLOCK_SKIP_PULUMI=1 FLOCK_GO_TARBALL=/tmp/go.tar.gz
  expect "Go: a local archive is still checked against the pinned sha256" \
    "$? $(count 'checksum mismatch' go1.log) $(in_ct bash -c 'test -e /usr/local/go && echo installed || echo absent')" "1 1 absent"
  provision go2.log FLOCK_SKIP_PULUMI=1 FLOCK_GO_TARBALL=/tmp/go.tar.gz FLOCK_GO_SHA256="$go_sha"
  expect "Go: installs from FLOCK_GO_TARBALL with a matching FLOCK_GO_SHA256" \
    "$? $(in_ct go version 2>&1)" "0 go version go1.26.8 linux/$(in_ct dpkg --print-architecture)"
  provision go3.log FLOCK_SKIP_PULUMI=1 FLOCK_GO_TARBALL=/tmp/go.tar.gz FLOCK_GO_SHA256="$go_sha"
  expect "Go: re-run changes nothing" "$? $(count '^changed:' go3.log) $(count '^unchanged: Go 1.26.8' go3.log)" "0 0 1"

  provision pu1.log FLOCK_SKIP_GO=1 FLOCK_PULUMI_TARBALL=/tmp/pulumi.tar.gz
  expect "Pulumi: a local archive is still checked against the pinned sha256" \
    "$? $(count 'checksum mismatch' pu1.log)" "1 1"
  provision pu2.log FLOCK_SKIP_GO=1 FLOCK_PULUMI_TARBALL=/tmp/pulumi.tar.gz FLOCK_PULUMI_SHA256="$pulumi_sha"
  expect "Pulumi: installs to /opt/pulumi, linked into /usr/local/bin" \
    "$? $(in_ct pulumi version 2>&1) $(in_ct readlink /usr/local/bin/pulumi-language-go)" "0 v3.255.0 /opt/pulumi/pulumi-language-go"
  provision pu3.log FLOCK_SKIP_GO=1 FLOCK_PULUMI_TARBALL=/tmp/pulumi.tar.gz FLOCK_PULUMI_SHA256="$pulumi_sha"
  expect "Pulumi: re-run changes nothing" "$? $(count '^changed:' pu3.log)" "0 0"
  expect "no temporary directories left behind, after failed runs either" \
    "$(in_ct bash -c 'ls -d /usr/local/.flock-* /opt/.flock-* /etc/docker/.flock-tmp.* 2>/dev/null | wc -l')" 0
}

# dockerd (Debian's 20.10) must accept the generated files. Unprivileged it
# cannot finish starting, but it parses and applies the configuration first
# (userns-remap creates its user, runtimes are registered) and only then fails
# at "Error initializing network controller" (iptables needs privileges).
dockerd_tests() {
  local f out
  in_ct bash -c 'printf "{\"not-a-docker-option\": true}" >/tmp/daemon-bogus.json'
  for f in default gvisor bogus; do
    out=$(in_ct bash -c "timeout 60 dockerd --config-file /tmp/daemon-$f.json --data-root /tmp/dd-$f \
      --exec-root /tmp/de-$f --pidfile /tmp/dp-$f.pid 2>&1 | grep -E 'unable to configure|Error initializing network controller' | head -n1")
    case "$f" in
      bogus) expect "dockerd check is able to fail (rejects an unknown key)" "${out:0:39}" "unable to configure the Docker daemon w" ;;
      *) expect "dockerd $(in_ct dpkg-query -W -f='${Version}' docker.io) accepts the $f daemon.json (gets past configuration)" \
        "$(grep -c 'Error initializing network controller' <<<"$out")" 1 ;;
    esac
  done
}

container_tests

skip "dockerd started by systemd with this daemon.json, docker group after re-login, forwarded-port bridges listening: needs a real VM; run: vagrant ssh -c 'sudo /vagrant/provision/verify-vm.sh'"
skip "gVisor actually running a networked container: needs a real VM (verify-vm.sh does it when FLOCK_GVISOR=1)"
skip "official Go/Pulumi downloads against the pinned checksums: no internet here (install path tested with local archives above)"
skip "Ubuntu 24.04: tested here on Debian 12 only (the VM box runs the same scripts)"

echo "== $((RUNS)) provisioning runs, $(($(date +%s) - T0)) s"
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
