#!/bin/sh
# Mounts every agent's directory filesystem at boot, before Docker starts the
# agents (flock-disks.service). The Pulumi program's prepare step makes each
# image (<state>/disks/<id>.img, its mount point in <id>.img.target) and
# mounts it; a reboot unmounts it, and an unmounted agent directory is root's
# with mode 0000, so its agent could write nothing until this runs.
# Usage: flock-mount-disks [STATE_ROOT]   (default /srv/flock/state)
set -u
state=${1:-/srv/flock/state}
rc=0
for img in "$state"/disks/*.img; do
  if [ ! -f "$img" ] || [ ! -f "$img.target" ]; then continue; fi
  dir=$(cat "$img.target")
  if [ -L "$dir" ] || [ ! -d "$dir" ]; then
    echo "flock-mount-disks: $dir is not a directory: $img not mounted" >&2
    rc=1
    continue
  fi
  mountpoint -q "$dir" && continue
  # noinit_itable: the kernel must not zero inode tables through the loop
  # device (that punches holes in the image, handing the agent's reserved
  # blocks back to the host); fallocate fills any hole already punched.
  fallocate -l "$(stat -c %s "$img")" "$img" || echo "flock-mount-disks: cannot allocate all of $img (is the disk full?)" >&2
  if mount -o loop,nosuid,nodev,noinit_itable "$img" "$dir"; then
    echo "flock-mount-disks: $img on $dir"
  else
    rc=1
  fi
done
exit "$rc"
