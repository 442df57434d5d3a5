#!/usr/bin/env bash
# shellcheck disable=SC2034 # globals here are read by the sourcing scripts
# Shared helpers for the AI Flock provisioning scripts (sourced, not run).
#
# Every step reports exactly one line per thing it manages, so a re-run can be
# checked for idempotency by grepping the output:
#   changed: <what>      the step modified the system
#   unchanged: <what>    already in the desired state
#   skipped: <what> (<reason>)
#   notice: <text>       information that needs no action by the script
# provision.sh prints a summary line at the end.

FLOCK_N_CHANGED=0
FLOCK_N_UNCHANGED=0
FLOCK_N_SKIPPED=0
# Set by the write helpers: 1 when the last call modified something.
FLOCK_LAST_CHANGED=0

changed() {
  FLOCK_N_CHANGED=$((FLOCK_N_CHANGED + 1))
  FLOCK_LAST_CHANGED=1
  printf 'changed: %s\n' "$*"
}

unchanged() {
  FLOCK_N_UNCHANGED=$((FLOCK_N_UNCHANGED + 1))
  FLOCK_LAST_CHANGED=0
  printf 'unchanged: %s\n' "$*"
}

skipped() {
  FLOCK_N_SKIPPED=$((FLOCK_N_SKIPPED + 1))
  printf 'skipped: %s\n' "$*"
}

notice() {
  printf 'notice: %s\n' "$*"
}

step() {
  printf '==> %s\n' "$*"
}

die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# is_true VALUE: 1/true/yes/on (any case) are true, everything else is false.
is_true() {
  case "${1,,}" in
    1 | true | yes | on) return 0 ;;
    *) return 1 ;;
  esac
}

# systemd_running: true only when systemd is PID 1 (sd_booted(3) semantics).
# Containers (the CI test) and chroots have no /run/systemd/system, so the
# scripts write configuration but never try to start or restart services.
systemd_running() {
  [[ -d /run/systemd/system ]]
}

require_root() {
  [[ ${EUID} -eq 0 ]] || die "provisioning must run as root (try: sudo $0)"
}

# deb_arch: the Debian architecture name (amd64, arm64, ...).
deb_arch() {
  dpkg --print-architecture
}

# --- files -------------------------------------------------------------------

# write_file PATH MODE OWNER GROUP < content
# Installs stdin as PATH atomically, only if content, mode or ownership differ.
# Reports changed/unchanged for PATH and sets FLOCK_LAST_CHANGED.
write_file() {
  local path=$1 mode=$2 owner=$3 group=$4 dir tmp
  dir=$(dirname "$path")
  [[ -d $dir ]] || die "write_file: directory $dir does not exist"
  tmp=$(mktemp "$dir/.flock-tmp.XXXXXX")
  cat >"$tmp"
  if [[ -f $path ]] && cmp -s "$tmp" "$path" &&
    [[ $(stat -c '%a %U %G' "$path") == "$mode $owner $group" ]]; then
    rm -f "$tmp"
    unchanged "$path"
    return 0
  fi
  chmod "$mode" "$tmp"
  chown "$owner:$group" "$tmp"
  mv -f "$tmp" "$path"
  changed "$path"
}

# remove_file PATH: deletes a file this provisioning used to manage.
remove_file() {
  local path=$1
  if [[ -e $path || -L $path ]]; then
    rm -f "$path"
    changed "$path (removed)"
  else
    unchanged "$path (absent)"
  fi
}

# ensure_dir PATH MODE OWNER GROUP
ensure_dir() {
  local path=$1 mode=$2 owner=$3 group=$4 what=()
  if [[ ! -d $path ]]; then
    [[ -e $path ]] && die "$path exists and is not a directory"
    mkdir -p "$path"
    what+=(created)
  fi
  if [[ $(stat -c '%U:%G' "$path") != "$owner:$group" ]]; then
    chown "$owner:$group" "$path"
    what+=("owner $owner:$group")
  fi
  if [[ $(stat -c '%a' "$path") != "$mode" ]]; then
    chmod "$mode" "$path"
    what+=("mode $mode")
  fi
  if ((${#what[@]})); then
    changed "$path (${what[*]})"
  else
    unchanged "$path"
  fi
}

# ensure_symlink LINK TARGET
ensure_symlink() {
  local link=$1 target=$2
  if [[ -L $link && $(readlink "$link") == "$target" ]]; then
    unchanged "$link -> $target"
    return 0
  fi
  [[ -e $link && ! -L $link ]] && die "$link exists and is not a symlink; refusing to replace it"
  ln -sfn "$target" "$link"
  changed "$link -> $target"
}

# verify_sha256 FILE EXPECTED
verify_sha256() {
  local file=$1 expected=$2 actual
  actual=$(sha256sum "$file" | awk '{print $1}')
  if [[ $actual != "${expected,,}" ]]; then
    die "checksum mismatch for $file: expected sha256 $expected, got $actual"
  fi
  notice "sha256 verified for $(basename "$file")"
}

# download URL DEST
download() {
  local url=$1 dest=$2
  command -v curl >/dev/null || die "curl is required to download $url"
  notice "downloading $url"
  curl -fsSL --retry 3 --retry-delay 2 --proto '=https' --tlsv1.2 -o "$dest" "$url" ||
    die "download failed: $url"
}

# Temporary paths removed when the run ends, even when it fails.
FLOCK_CLEANUP=()
cleanup_later() {
  FLOCK_CLEANUP+=("$@")
}
run_cleanup() {
  ((${#FLOCK_CLEANUP[@]} == 0)) || rm -rf -- "${FLOCK_CLEANUP[@]}"
  FLOCK_CLEANUP=()
}

# --- apt ---------------------------------------------------------------------

FLOCK_APT_UPDATED=0

# apt_update_once: refreshes the package lists at most once per run, and only
# when something actually has to be installed (a re-run touches nothing).
apt_update_once() {
  if [[ $FLOCK_APT_UPDATED -eq 0 ]]; then
    notice "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    FLOCK_APT_UPDATED=1
  fi
}

pkg_installed() {
  [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

# pkg_available PKG: true if apt knows an installation candidate for PKG.
pkg_available() {
  local candidate
  candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
  [[ -n $candidate && $candidate != "(none)" ]]
}

# apt_install PKG...: installs the missing packages (no recommends, so the
# result is the same on every run), reporting one line per package.
apt_install() {
  local pkg missing=()
  for pkg in "$@"; do
    if pkg_installed "$pkg"; then
      unchanged "package $pkg"
    else
      missing+=("$pkg")
    fi
  done
  ((${#missing[@]})) || return 0
  apt_update_once
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" >/dev/null
  for pkg in "${missing[@]}"; do
    changed "package $pkg"
  done
}

# Without systemd (containers, chroots) maintainer scripts must not try to
# start daemons: a policy-rc.d that answers 101 ("action forbidden") is the
# Debian-standard way. It is installed only if none exists and removed on exit.
FLOCK_POLICY_RC_D=/usr/sbin/policy-rc.d
FLOCK_POLICY_RC_D_OURS=0

block_service_starts() {
  systemd_running && return 0
  [[ -e $FLOCK_POLICY_RC_D ]] && return 0
  printf '#!/bin/sh\n# Temporary, from AI Flock provisioning: no init system here.\nexit 101\n' >"$FLOCK_POLICY_RC_D"
  chmod 0755 "$FLOCK_POLICY_RC_D"
  FLOCK_POLICY_RC_D_OURS=1
}

unblock_service_starts() {
  if [[ $FLOCK_POLICY_RC_D_OURS -eq 1 ]]; then
    rm -f "$FLOCK_POLICY_RC_D"
    FLOCK_POLICY_RC_D_OURS=0
  fi
}

# --- IPv4 ----------------------------------------------------------------------

# ipv4_to_int A.B.C.D
ipv4_to_int() {
  local IFS=. a b c d
  read -r a b c d <<<"$1"
  echo $(((a << 24) | (b << 16) | (c << 8) | d))
}

# valid_cidr A.B.C.D/N: a well-formed IPv4 network address with prefix N.
valid_cidr() {
  local cidr=$1 addr prefix octet
  [[ $cidr =~ ^([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3})/([0-9]{1,2})$ ]] || return 1
  addr=${BASH_REMATCH[1]}
  prefix=${BASH_REMATCH[2]}
  ((prefix >= 1 && prefix <= 32)) || return 1
  local IFS=.
  for octet in $addr; do
    ((10#$octet <= 255)) || return 1
  done
  # host bits must be zero
  local n mask
  n=$(ipv4_to_int "$addr")
  mask=$(((0xffffffff << (32 - prefix)) & 0xffffffff))
  (((n & mask) == n))
}

# cidr_overlap A/N B/M: true if the two IPv4 networks share any address.
cidr_overlap() {
  local a=${1%/*} ap=${1#*/} b=${2%/*} bp=${2#*/} as ae bs be
  as=$(ipv4_to_int "$a")
  ae=$((as + (1 << (32 - ap)) - 1))
  bs=$(ipv4_to_int "$b")
  be=$((bs + (1 << (32 - bp)) - 1))
  ((as <= be && bs <= ae))
}
