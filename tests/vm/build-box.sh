#!/usr/bin/env bash
# Builds the Vagrant box flock/debian-12 for the libvirt provider, offline
# except for Debian's own mirror, and adds it to Vagrant:
#
#   sudo tests/vm/build-box.sh
#
# The box is Debian 12 (bookworm) made with debootstrap: linux-image-amd64,
# systemd (networkd DHCP on the first NIC, resolved), openssh-server, sudo,
# AppArmor (Docker's docker-default profile needs it), rsync (the /vagrant
# synced folder), ca-certificates, curl, jq; user vagrant (password vagrant,
# passwordless sudo, Vagrant's insecure public key from Debian's vagrant
# package); one bootable ext4 partition on an MBR disk with extlinux; the
# console on ttyS0. Nothing is downloaded except Debian packages.
#
# The finished .box is cached under FLOCK_BOX_CACHE, keyed on a hash of this
# script and everything it reads, so a second run with no change only checks
# that Vagrant has that very box (seconds). FLOCK_BOX_REBUILD=1 forces a build
# (for instance to pick up Debian point releases).
#
# Environment:
#   FLOCK_BOX_NAME     box name for `vagrant box add` (default flock/debian-12)
#   FLOCK_BOX_MIRROR   Debian mirror (default http://deb.debian.org/debian)
#   FLOCK_BOX_SIZE_GB  virtual disk size in GB (default 20)
#   FLOCK_BOX_CACHE    cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/ai-flock/vm)
#   FLOCK_BOX_REBUILD  1: ignore the cached box
#
# Needs root (debootstrap, loop devices, mount). Prints the path of the .box
# and how long it took.
set -euo pipefail

BOX_NAME=${FLOCK_BOX_NAME:-flock/debian-12}
MIRROR=${FLOCK_BOX_MIRROR:-http://deb.debian.org/debian}
SIZE_GB=${FLOCK_BOX_SIZE_GB:-20}
CACHE=${FLOCK_BOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ai-flock/vm}
REBUILD=${FLOCK_BOX_REBUILD:-0}
SUITE=bookworm
# The packages of the box; the provisioning installs the rest (docker.io, ...).
PACKAGES=(
  linux-image-amd64 initramfs-tools systemd systemd-sysv systemd-resolved udev dbus
  openssh-server sudo apparmor rsync ca-certificates curl jq iproute2 kmod procps netbase
)
# Vagrant's well-known insecure key, as Debian's vagrant package ships it.
VAGRANT_PUB_CANDIDATES=(/usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub /usr/share/vagrant/keys/vagrant.pub)

T0=$(date +%s)
log() { printf 'build-box: %s\n' "$*" >&2; }
die() {
  printf 'build-box: error: %s\n' "$*" >&2
  exit 1
}

[[ $EUID -eq 0 ]] || die "needs root for debootstrap, loop devices and mount (sudo $0)"
[[ $SIZE_GB =~ ^[1-9][0-9]*$ ]] || die "FLOCK_BOX_SIZE_GB must be a whole number of GB (got '$SIZE_GB')"

# --- host tools (CI machines are fresh) ------------------------------------------

ensure_host_tools() {
  local need=() pair
  # binary:package
  for pair in debootstrap:debootstrap qemu-img:qemu-utils extlinux:extlinux sfdisk:fdisk \
    mkfs.ext4:e2fsprogs vagrant:vagrant losetup:mount; do
    command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
  done
  [[ -f /usr/lib/syslinux/mbr/mbr.bin ]] || need+=(syslinux-common)
  ((${#need[@]})) || return 0
  log "installing ${need[*]} with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}
ensure_host_tools

VAGRANT_PUB=
for f in "${VAGRANT_PUB_CANDIDATES[@]}"; do
  [[ -f $f ]] && VAGRANT_PUB=$f && break
done
[[ -n $VAGRANT_PUB ]] || die "Vagrant's insecure public key not found (looked at ${VAGRANT_PUB_CANDIDATES[*]})"

# The cache key: this script, the key it installs, and the settings.
KEY=$(
  {
    cat "${BASH_SOURCE[0]}" "$VAGRANT_PUB"
    printf '%s\n' "$MIRROR" "$SIZE_GB" "$SUITE"
  } | sha256sum | cut -c1-16
)
BOX_FILE=$CACHE/flock-debian-12-$KEY.box
VAGRANT_DIR=${VAGRANT_HOME:-$HOME/.vagrant.d}
INSTALLED_STAMP=$VAGRANT_DIR/boxes/${BOX_NAME//\//-VAGRANTSLASH-}/0/libvirt/flock-box-key

# --- build -------------------------------------------------------------------------

WORK=
LOOP=
MNT=
cleanup() {
  if [[ -n $WORK ]]; then
    # Unmount whatever is still mounted below the work dir, deepest first.
    awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
  fi
  [[ -n $LOOP ]] && losetup -d "$LOOP" 2>/dev/null
  if [[ -n $WORK ]]; then
    # Never rm -rf through a bind mount of /dev or of the package cache.
    if awk -v w="$WORK" 'index($2, w) == 1 {found = 1} END {exit !found}' /proc/mounts; then
      log "still mounted below $WORK; leaving it in place"
    else
      rm -rf "$WORK"
    fi
  fi
  return 0
}
trap cleanup EXIT

# in_root COMMAND...: run in the new root with a minimal, clean environment.
in_root() {
  chroot "$WORK/root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 HOME=/root "$@"
}

make_root() {
  local root=$WORK/root
  log "debootstrap $SUITE from $MIRROR"
  mkdir -p "$CACHE/debs" "$CACHE/apt-archives/partial"
  # --cache-dir keeps the .debs, so a rebuild downloads only what changed.
  debootstrap --variant=minbase --cache-dir="$CACHE/debs" "$SUITE" "$root" "$MIRROR" \
    >"$WORK/debootstrap.log" 2>&1 || {
    tail -n 30 "$WORK/debootstrap.log" >&2
    die "debootstrap failed"
  }
  cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
  # No daemons may start inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
  # Downloaded packages are kept on the host between builds.
  mount --bind "$CACHE/apt-archives" "$root/var/cache/apt/archives"
  in_root apt-get update -qq
  # The base system from debootstrap, up to the point release and security updates.
  in_root apt-get dist-upgrade -y -qq \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold >>"$WORK/apt.log" 2>&1 || {
    tail -n 30 "$WORK/apt.log" >&2
    die "apt-get dist-upgrade in the new root failed"
  }
  log "installing ${PACKAGES[*]}"
  # Last: systemd-resolved turns /etc/resolv.conf into a link that works only
  # once the VM runs, so nothing can be downloaded after this.
  in_root apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${PACKAGES[@]}" >>"$WORK/apt.log" 2>&1 || {
    tail -n 30 "$WORK/apt.log" >&2
    die "apt-get install in the new root failed"
  }
  umount "$root/var/cache/apt/archives" "$root/dev/pts" "$root/dev" "$root/sys" "$root/proc"
  rm -f "$root/usr/sbin/policy-rc.d"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/*
}

configure_root() {
  local root=$WORK/root uuid=$1
  echo flock-vm >"$root/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\tflock-vm\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
  printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t1\n' "$uuid" >"$root/etc/fstab"

  # DHCP on the first NIC (en* with predictable names, eth* without).
  cat >"$root/etc/systemd/network/10-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=yes
EOF
  in_root systemctl enable systemd-networkd.service systemd-resolved.service ssh.service >/dev/null 2>&1
  ln -sfn ../run/systemd/resolve/stub-resolv.conf "$root/etc/resolv.conf"

  # Every VM gets its own machine-id (DHCP client id) and SSH host keys.
  : >"$root/etc/machine-id"
  rm -f "$root/var/lib/dbus/machine-id" "$root"/etc/ssh/ssh_host_*
  cat >"$root/etc/systemd/system/flock-ssh-hostkeys.service" <<'EOF'
[Unit]
Description=Generate this VM's own SSH host keys on first boot
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target ssh.service
EOF
  in_root systemctl enable flock-ssh-hostkeys.service >/dev/null 2>&1

  # The vagrant user, as Vagrant expects it.
  in_root useradd -m -s /bin/bash -G sudo vagrant
  echo vagrant:vagrant | in_root chpasswd
  printf 'vagrant ALL=(ALL) NOPASSWD:ALL\nDefaults:vagrant !requiretty\n' >"$root/etc/sudoers.d/vagrant"
  chmod 440 "$root/etc/sudoers.d/vagrant"
  install -d -m 700 -o 1000 -g 1000 "$root/home/vagrant/.ssh"
  install -m 600 -o 1000 -g 1000 "$VAGRANT_PUB" "$root/home/vagrant/.ssh/authorized_keys"
  [[ $(in_root id -u vagrant) == 1000 ]] || die "user vagrant did not get UID 1000"
  # Faster logins: no reverse lookups of the host.
  printf 'UseDNS no\n' >"$root/etc/ssh/sshd_config.d/vagrant.conf"

  # extlinux follows the /vmlinuz and /initrd.img links the kernel package
  # maintains, so a kernel upgrade inside the VM needs no bootloader update.
  # AppArmor is on by default in Debian's kernel; apparmor=1 makes it explicit.
# edd=off: the BIOS disk probe costs seconds under software emulation.
  mkdir -p "$root/boot/extlinux"
  cat >"$root/boot/extlinux/extlinux.conf" <<EOF
SERIAL 0 115200
DEFAULT debian
PROMPT 0
TIMEOUT 0
LABEL debian
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND root=UUID=$uuid ro console=tty0 console=ttyS0,115200n8 apparmor=1 edd=off
EOF
  [[ -e $root/vmlinuz && -e $root/initrd.img ]] || die "the kernel package left no /vmlinuz or /initrd.img"
}

make_disk() {
  local raw=$WORK/disk.raw uuid=$1 offset=$((2048 * 512)) size
  size=$((SIZE_GB * 1024 * 1024 * 1024))
  log "disk: ${SIZE_GB} GB, MBR, one bootable ext4 partition, extlinux"
  truncate -s "$size" "$raw"
  printf 'label: dos\nstart=2048, type=83, bootable\n' | sfdisk -q "$raw"
  # Partition nodes (loopNp1) are not available everywhere: address the
  # partition by offset instead. ^64bit: extlinux cannot boot from 64bit ext4.
  LOOP=$(losetup -f --show -o "$offset" --sizelimit "$((size - offset))" "$raw")
  mkfs.ext4 -q -F -L flock-root -U "$uuid" -O ^64bit \
    -E lazy_itable_init=1,lazy_journal_init=1,nodiscard -d "$WORK/root" "$LOOP"
  MNT=$WORK/mnt
  mkdir -p "$MNT"
  mount "$LOOP" "$MNT"
  extlinux --install "$MNT/boot/extlinux" >/dev/null 2>&1 || die "extlinux --install failed"
  umount "$MNT"
  losetup -d "$LOOP"
  LOOP=
  dd if=/usr/lib/syslinux/mbr/mbr.bin of="$raw" bs=440 count=1 conv=notrunc status=none
  qemu-img convert -O qcow2 "$raw" "$WORK/box/box.img"
  rm -f "$raw"
}

build_box() {
  local uuid
  uuid=$(cat /proc/sys/kernel/random/uuid)
  mkdir -p "$CACHE"
  WORK=$(mktemp -d "$CACHE/build.XXXXXX")
  mkdir -p "$WORK/box"
  make_root
  configure_root "$uuid"
  make_disk "$uuid"
  printf '{"provider":"libvirt","format":"qcow2","virtual_size":%d}\n' "$SIZE_GB" >"$WORK/box/metadata.json"
  cat >"$WORK/box/Vagrantfile" <<'EOF'
# flock/debian-12, built by tests/vm/build-box.sh.
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.disk_bus = "virtio"
  end
end
EOF
  echo "$KEY" >"$WORK/box/flock-box-key"
  log "packing the box"
  tar -C "$WORK/box" -cf - metadata.json Vagrantfile flock-box-key box.img | gzip -1 >"$BOX_FILE.tmp"
  mv "$BOX_FILE.tmp" "$BOX_FILE"
  # Older builds of this box are of no more use.
  find "$CACHE" -maxdepth 1 -name 'flock-debian-12-*.box' ! -name "${BOX_FILE##*/}" -delete
}

# remove_stale_volumes: vagrant-libvirt copies a box into libvirt's pool once
# per box file (the volume name carries its mtime) and never removes it. The
# copies of earlier builds go, unless a VM still has one as its backing file.
remove_stale_volumes() {
  command -v virsh >/dev/null && virsh -q pool-info default >/dev/null 2>&1 || return 0
  local prefix=${BOX_NAME//\//-VAGRANTSLASH-}_vagrant_box_image_ vol used dom
  used=$(for dom in $(virsh list --all --name); do virsh dumpxml "$dom"; done 2>/dev/null)
  virsh -q vol-list default 2>/dev/null | awk '{print $1}' | while read -r vol; do
    [[ $vol == "$prefix"* ]] || continue
    grep -qF "/$vol'" <<<"$used" && continue
    virsh -q vol-delete --pool default "$vol" >/dev/null && log "removed the stale pool volume $vol"
  done
}

if [[ $REBUILD == 1 || ! -s $BOX_FILE ]]; then
  build_box
  log "built $BOX_FILE in $(($(date +%s) - T0)) s"
else
  log "cache hit: $BOX_FILE"
fi

if [[ $(cat "$INSTALLED_STAMP" 2>/dev/null) == "$KEY" ]]; then
  log "vagrant already has $BOX_NAME $KEY"
else
  log "vagrant box add --force --name $BOX_NAME"
  VAGRANT_CHECKPOINT_DISABLE=1 vagrant box add --force --name "$BOX_NAME" "$BOX_FILE" >/dev/null
  [[ $(cat "$INSTALLED_STAMP" 2>/dev/null) == "$KEY" ]] || die "vagrant box add did not install $BOX_FILE as expected ($INSTALLED_STAMP)"
  remove_stale_volumes
fi
echo "$BOX_FILE"
log "done in $(($(date +%s) - T0)) s"
