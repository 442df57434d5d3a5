#!/usr/bin/env bash
# Docker engine, its hardened daemon.json and optional gVisor (sourced).
#
# Engine package: the distribution's `docker.io` (Debian 12 and Ubuntu 24.04
# both ship it). It comes from the archive the machine already trusts (no
# third-party apt repository or signing key to fetch), gets the distribution's
# security updates through unattended-upgrades, installs from a plain Debian
# mirror (all the CI machines can reach) and is what the tests exercise. Docker
# Inc.'s docker-ce is newer; if it is already installed we leave it alone.

FLOCK_DAEMON_JSON=/etc/docker/daemon.json

# Settings (all overridable from the environment):
: "${FLOCK_GVISOR:=0}"                          # 1: install runsc, register runtime "runsc"
: "${FLOCK_RUNSC_PATH:=}"                       # use this runsc binary instead of the package
: "${FLOCK_USERNS_REMAP:=0}"                    # 1: "userns-remap" (see README)
: "${FLOCK_USERNS_REMAP_USER:=default}"         # value for userns-remap
: "${FLOCK_DOCKER_POOL:=172.16.0.0/12}"         # default-address-pools base
: "${FLOCK_DOCKER_POOL_SIZE:=24}"               # ... and per-network prefix: 4096 /24s
: "${FLOCK_NETWORK_POOL:=10.210.0.0/16}"        # flock:network.pool (explicit agent subnets)
: "${FLOCK_DOCKER_LOG_MAX_SIZE:=10m}"
: "${FLOCK_DOCKER_LOG_MAX_FILE:=3}"

# runsc_path: the runsc binary to register (package path unless overridden).
runsc_path() {
  if [[ -n $FLOCK_RUNSC_PATH ]]; then
    echo "$FLOCK_RUNSC_PATH"
  else
    echo /usr/bin/runsc
  fi
}

# check_docker_settings: validate the inputs before touching anything.
check_docker_settings() {
  valid_cidr "$FLOCK_DOCKER_POOL" ||
    die "FLOCK_DOCKER_POOL must be an IPv4 network such as 172.16.0.0/12 (got '$FLOCK_DOCKER_POOL')"
  valid_cidr "$FLOCK_NETWORK_POOL" ||
    die "FLOCK_NETWORK_POOL must be an IPv4 network such as 10.210.0.0/16 (got '$FLOCK_NETWORK_POOL')"
  if ! [[ $FLOCK_DOCKER_POOL_SIZE =~ ^[0-9]+$ ]] ||
    ((FLOCK_DOCKER_POOL_SIZE < ${FLOCK_DOCKER_POOL#*/} || FLOCK_DOCKER_POOL_SIZE > 29)); then
    die "FLOCK_DOCKER_POOL_SIZE must be between the pool's prefix (/${FLOCK_DOCKER_POOL#*/}) and 29 (got '$FLOCK_DOCKER_POOL_SIZE')"
  fi
  # The flock gives each agent network an explicit subnet from
  # FLOCK_NETWORK_POOL; Docker's automatic pools must never hand out the same
  # addresses to another network.
  if cidr_overlap "$FLOCK_DOCKER_POOL" "$FLOCK_NETWORK_POOL"; then
    die "FLOCK_DOCKER_POOL $FLOCK_DOCKER_POOL overlaps the flock's agent subnet pool $FLOCK_NETWORK_POOL (flock:network.pool); pick a disjoint range"
  fi
  [[ $FLOCK_DOCKER_LOG_MAX_FILE =~ ^[1-9][0-9]*$ ]] ||
    die "FLOCK_DOCKER_LOG_MAX_FILE must be a positive integer (got '$FLOCK_DOCKER_LOG_MAX_FILE')"
  [[ $FLOCK_DOCKER_LOG_MAX_SIZE =~ ^[1-9][0-9]*[kmg]$ ]] ||
    die "FLOCK_DOCKER_LOG_MAX_SIZE must look like 10m (got '$FLOCK_DOCKER_LOG_MAX_SIZE')"
}

# install_gvisor: the runsc runtime, only with FLOCK_GVISOR=1.
install_gvisor() {
  if ! is_true "$FLOCK_GVISOR"; then
    skipped "gVisor runsc (FLOCK_GVISOR is not 1)"
    return 0
  fi
  if [[ -n $FLOCK_RUNSC_PATH ]]; then
    [[ -x $FLOCK_RUNSC_PATH ]] ||
      die "FLOCK_GVISOR=1: FLOCK_RUNSC_PATH=$FLOCK_RUNSC_PATH is not an executable file"
    unchanged "gVisor runsc at $FLOCK_RUNSC_PATH (FLOCK_RUNSC_PATH)"
    return 0
  fi
  if ! pkg_installed runsc; then
    apt_update_once
    pkg_available runsc ||
      die "FLOCK_GVISOR=1 but no 'runsc' package is available from this machine's apt sources; install gVisor from https://gvisor.dev/docs/user_guide/install/ and set FLOCK_RUNSC_PATH=/path/to/runsc, or unset FLOCK_GVISOR"
  fi
  apt_install runsc
}

# render_daemon_json: prints the desired daemon.json on stdout.
#
# The current file is merged, not replaced: keys an administrator added
# (registry mirrors, debug, ...) survive. The keys below are owned by this
# script: hardening keys are always set; the optional ones ("userns-remap",
# runtimes.runsc) are removed again when their toggle is off. jq -S sorts the
# keys, so the same inputs always produce byte-identical output.
render_daemon_json() {
  local current='{}' remap='null' runsc='null'
  if [[ -s $FLOCK_DAEMON_JSON ]]; then
    current=$(jq -c . "$FLOCK_DAEMON_JSON" 2>/dev/null) ||
      die "$FLOCK_DAEMON_JSON is not valid JSON; fix or remove it and re-run"
    [[ $(jq -r type <<<"$current") == object ]] ||
      die "$FLOCK_DAEMON_JSON must contain a JSON object"
  fi
  if is_true "$FLOCK_USERNS_REMAP"; then
    remap=$(jq -cn --arg u "$FLOCK_USERNS_REMAP_USER" '$u')
  fi
  if is_true "$FLOCK_GVISOR"; then
    # --network=host: with gVisor's own netstack runsc refuses to start a
    # container that has networking ("cannot run with network enabled in root
    # network namespace"); with --network=host it uses the container's network
    # namespace through the host kernel's stack (provision/README.md says what that trades away).
    runsc=$(jq -cn --arg p "$(runsc_path)" '{path: $p, runtimeArgs: ["--network=host"]}')
  fi
  jq -S --indent 2 \
    --arg logsize "$FLOCK_DOCKER_LOG_MAX_SIZE" \
    --arg logfiles "$FLOCK_DOCKER_LOG_MAX_FILE" \
    --arg pool "$FLOCK_DOCKER_POOL" \
    --argjson poolsize "$FLOCK_DOCKER_POOL_SIZE" \
    --argjson remap "$remap" \
    --argjson runsc "$runsc" \
    '
    . as $cur
    | $cur
    # bounded logs for every container
    | .["log-driver"] = "json-file"
    | .["log-opts"] = (($cur["log-opts"] // {}) + {"max-size": $logsize, "max-file": $logfiles})
    # containers keep running while dockerd restarts or upgrades
    | .["live-restore"] = true
    # every container starts with no-new-privileges unless it opts out
    | .["no-new-privileges"] = true
    # published ports via iptables only, no docker-proxy processes
    | .["userland-proxy"] = false
    # no traffic between containers on the default bridge
    | .["icc"] = false
    # many small networks: the 31-network default would run out
    | .["default-address-pools"] = [{"base": $pool, "size": $poolsize}]
    | if $remap == null then del(.["userns-remap"]) else .["userns-remap"] = $remap end
    | if $runsc == null then
        del(.runtimes.runsc)
        | if (.runtimes // {}) == {} then del(.runtimes) else . end
        | if .["default-runtime"] == "runsc" then del(.["default-runtime"]) else . end
      else
        .runtimes = ((.runtimes // {}) + {"runsc": $runsc})
      end
    ' <<<"$current"
}

# configure_daemon_json: writes daemon.json; sets FLOCK_DAEMON_JSON_CHANGED.
FLOCK_DAEMON_JSON_CHANGED=0
configure_daemon_json() {
  local rendered
  ensure_dir /etc/docker 755 root root
  rendered=$(render_daemon_json)
  write_file "$FLOCK_DAEMON_JSON" 644 root root <<<"$rendered"
  FLOCK_DAEMON_JSON_CHANGED=$FLOCK_LAST_CHANGED
}

# validate_daemon_json: dockerd >= 23 can check a config without starting.
validate_daemon_json() {
  if command -v dockerd >/dev/null && dockerd --help 2>/dev/null | grep -q -- '--validate'; then
    dockerd --validate --config-file "$FLOCK_DAEMON_JSON" >/dev/null ||
      die "dockerd rejects $FLOCK_DAEMON_JSON (see the message above)"
    notice "dockerd --validate accepts $FLOCK_DAEMON_JSON"
  else
    notice "this dockerd has no --validate; $FLOCK_DAEMON_JSON is checked when docker starts"
  fi
}

install_docker_engine() {
  if pkg_installed docker-ce; then
    notice "docker-ce (Docker Inc. packages) is installed; not installing docker.io over it"
    unchanged "package docker-ce"
    return 0
  fi
  apt_install docker.io
}

# ensure_docker_running: enable and (re)start dockerd when systemd runs; a
# restart happens only when daemon.json changed or the service is down.
ensure_docker_running() {
  if ! systemd_running; then
    skipped "docker service start/restart (systemd is not running here; configuration written only)"
    return 0
  fi
  if ! systemctl is-enabled --quiet docker.service 2>/dev/null; then
    systemctl enable --quiet docker.service
    changed "docker.service enabled"
  else
    unchanged "docker.service enabled"
  fi
  if [[ $FLOCK_DAEMON_JSON_CHANGED -eq 1 ]] || ! systemctl is-active --quiet docker.service; then
    systemctl restart docker.service ||
      die "docker.service failed to (re)start with $FLOCK_DAEMON_JSON; see: journalctl -u docker"
    changed "docker.service restarted"
  else
    unchanged "docker.service running"
  fi
  local i
  for i in $(seq 1 30); do
    docker info >/dev/null 2>&1 && break
    [[ $i -eq 30 ]] && die "docker did not answer within 30 s after starting; see: journalctl -u docker"
    sleep 1
  done
  if is_true "$FLOCK_GVISOR"; then
    docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' ||
      die "docker is running but does not list the runsc runtime"
    notice "docker lists the runsc runtime"
  fi
}

provision_docker() {
  step "Docker engine"
  check_docker_settings
  # apparmor: dockerd confines containers with its docker-default profile only
  # when apparmor_parser exists (CIS Docker Benchmark 5.1); docker.io merely
  # recommends the package, and recommends are not installed here.
  apt_install ca-certificates curl jq iptables iproute2 apparmor
  install_gvisor
  # daemon.json before the engine: on a fresh machine dockerd's very first
  # start already uses the hardened configuration.
  configure_daemon_json
  install_docker_engine
  validate_daemon_json
  ensure_docker_running
}
