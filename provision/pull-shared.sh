#!/usr/bin/env bash
# Copy a snapshot of the VM's shared directory (/srv/flock/shared) to the host.
#
#   provision/pull-shared.sh [DEST]          # default DEST: .vagrant/flock-shared
#   FLOCK_PULL_PATH=logs provision/pull-shared.sh
#
# Run it on the host, next to the Vagrantfile. The shared directory is not a
# synced folder on purpose (vboxsf ignores chown/chmod, so per-agent ownership
# could not be enforced there); this reads it with root rights inside the VM and
# unpacks it as you. DEST is replaced as a whole on every run (a snapshot,
# not a live view), and only if it is missing or an earlier snapshot.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-$repo/.vagrant/flock-shared}
sub=${FLOCK_PULL_PATH:-.}
marker=.flock-shared-snapshot

die() {
  printf 'pull-shared: %s\n' "$*" >&2
  exit 1
}

case "/$sub/" in
  //* | */../*) die "FLOCK_PULL_PATH must be relative to /srv/flock/shared without '..' (got '$sub')" ;;
esac
command -v vagrant >/dev/null || die "vagrant not found on PATH"
if [[ -e $dest && ! -e $dest/$marker ]]; then
  die "$dest exists and is not an earlier snapshot; choose another DEST"
fi

mkdir -p "$(dirname "$dest")"
dest=$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --no-tty: with a TTY the remote stream would be mangled (CR/LF translation).
remote="sudo tar -C /srv/flock/shared -cf - -- $(printf '%q' "$sub")"
(cd "$repo" && vagrant ssh --no-tty -c "$remote") | tar -xf - -C "$tmp" --no-same-owner
: >"$tmp/$marker"

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
printf 'pull-shared: /srv/flock/shared/%s -> %s\n' "${sub#./}" "$dest"
