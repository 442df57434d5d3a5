#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian/Ubuntu machine and makes
# sure a Docker engine answers. Idempotent; needs root for the installs
# (it only installs what is missing). Used by `make check` and .ci/run.
set -euo pipefail

need=()
command -v docker >/dev/null 2>&1 || need+=(docker.io)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v ruby >/dev/null 2>&1 || need+=(ruby)
command -v fuse-overlayfs >/dev/null 2>&1 || need+=(fuse-overlayfs)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v jq >/dev/null 2>&1 || need+=(jq)
# A real Prometheus scrapes the e2e flock (tests/e2e/metrics_test.go).
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
# tmux: flock-agent top is tested as a person uses it, in a terminal
# (agent/cli TestTopInATerminal).
command -v tmux >/dev/null 2>&1 || need+=(tmux)
# gVisor: the isolation probes run a second time on a flock under runsc.
command -v runsc >/dev/null 2>&1 || need+=(runsc)
# QEMU's user-mode emulation: the Fargate replay runs the arm64 agent image
# (flock:aws.cpuArchitecture ARM64) on this amd64 engine.
[ "$(uname -m)" = aarch64 ] || [ -x /usr/libexec/qemu-binfmt/aarch64-binfmt-P ] || need+=(qemu-user-static)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need[*]}; run as root (sudo $0) to install them" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Register the aarch64 handler with the kernel (what systemd-binfmt does at
# boot; a machine without systemd never does). F: the interpreter is opened
# now, so containers run arm64 binaries without it in their root.
if [ "$(uname -m)" != aarch64 ] && [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && [ "$(id -u)" -eq 0 ]; then
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
  if [ -w /proc/sys/fs/binfmt_misc/register ] && [ -r /usr/lib/binfmt.d/qemu-aarch64.conf ]; then
    grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register && echo "setup: registered the aarch64 binfmt handler (qemu-user-static)"
  else
    echo "setup: cannot register an aarch64 binfmt handler here: the Fargate replay's ARM64 test will say it skips" >&2
  fi
fi

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null 2>&1 || { echo "setup: Go is required (https://go.dev/dl/); provision/ installs it in the VM" >&2; exit 1; }

wait_docker() {
  for _ in $(seq 1 "$1"); do
    docker info >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}

# Register runsc with the engine as the runtime "runsc", with --network=host
# (gVisor's own network stack needs more than this kind of machine allows).
# Only the runtime is added; the rest of daemon.json is kept.
daemon_json=/etc/docker/daemon.json
runsc_json="{\"path\":\"$(command -v runsc)\",\"runtimeArgs\":[\"--network=host\"]}"
if [ "$(jq -c '.runtimes.runsc // empty' "$daemon_json" 2>/dev/null)" != "$runsc_json" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "setup: registering runsc with Docker needs root (sudo $0)" >&2; exit 1; }
  mkdir -p "$(dirname "$daemon_json")"
  [ -s "$daemon_json" ] || echo '{}' > "$daemon_json"
  jq --argjson r "$runsc_json" '.runtimes.runsc = $r' "$daemon_json" > "$daemon_json.new"
  mv "$daemon_json.new" "$daemon_json"
  echo "setup: registered runsc in $daemon_json"
  # A running engine reloads its runtimes on SIGHUP.
  if pid=$(pidof dockerd); then kill -HUP "$pid"; sleep 1; fi
fi

if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || { echo "setup: the Docker engine does not answer and only root can start it" >&2; exit 1; }
  echo "setup: starting dockerd"
  (dockerd >/var/log/flock-dockerd.log 2>&1 &)
  if ! wait_docker 30; then
    # Nested in a container, overlayfs on overlayfs fails: use fuse-overlayfs.
    pkill dockerd || true
    sleep 2
    echo "setup: retrying dockerd with the fuse-overlayfs storage driver"
    (dockerd --storage-driver fuse-overlayfs >/var/log/flock-dockerd.log 2>&1 &)
    wait_docker 60 || { echo "setup: dockerd did not start; see /var/log/flock-dockerd.log" >&2; tail -20 /var/log/flock-dockerd.log >&2; exit 1; }
  fi
fi
for _ in $(seq 1 10); do
  docker info -f '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && break
  sleep 1
done
docker info -f '{{json .Runtimes}}' | grep -q '"runsc"' || { echo "setup: the engine did not register the runsc runtime (see $daemon_json)" >&2; exit 1; }
echo "setup: docker $(docker version -f '{{.Server.Version}}') ready, runtimes: $(docker info -f '{{range $k, $v := .Runtimes}}{{$k}} {{end}}')"
