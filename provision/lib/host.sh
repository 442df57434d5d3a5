#!/usr/bin/env bash
# The flock's host directories, the operator user, and the bridge that makes
# the Vagrant forwarded ports reach the bus (sourced).

: "${FLOCK_ROOT:=/srv/flock}"
: "${FLOCK_USER:=vagrant}"
: "${FLOCK_FORWARD_PORTS:=4222 8222}"
: "${FLOCK_FORWARD_ADDRESS:=auto}"

# provision_flock_dirs: only the roots. The Pulumi program creates
# agents/<id> and logs/<id>.log itself, owned by each agent's own UID.
#   agents/, logs/  0711  traverse only: nobody can list which agents exist
#   common/         0755  read by every agent (mounted read-only)
#   state/          0711  bus config and per-agent credentials live below
provision_flock_dirs() {
  step "Flock directories under $FLOCK_ROOT"
  ensure_dir "$FLOCK_ROOT" 755 root root
  ensure_dir "$FLOCK_ROOT/shared" 755 root root
  ensure_dir "$FLOCK_ROOT/shared/agents" 711 root root
  ensure_dir "$FLOCK_ROOT/shared/common" 755 root root
  ensure_dir "$FLOCK_ROOT/shared/logs" 711 root root
  ensure_dir "$FLOCK_ROOT/state" 711 root root
}

# provision_disk_mounts: each agent's directory is a filesystem image the
# Pulumi program loop-mounts (its disk quota). A reboot unmounts them;
# flock-disks.service mounts them again before Docker starts the agents.
provision_disk_mounts() {
  step "Agent directory filesystems at boot"
  local unit=/etc/systemd/system/flock-disks.service changed_any
  write_file /usr/local/sbin/flock-mount-disks 755 root root <"$FLOCK_PROVISION_DIR/flock-mount-disks.sh"
  changed_any=$FLOCK_LAST_CHANGED
  write_file "$unit" 644 root root <<EOF
# Managed by AI Flock provisioning (provision/lib/host.sh).
[Unit]
Description=AI Flock: mount each agent's directory filesystem before Docker starts the agents
RequiresMountsFor=$FLOCK_ROOT/state $FLOCK_ROOT/shared
Before=docker.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/flock-mount-disks $FLOCK_ROOT/state

[Install]
WantedBy=multi-user.target docker.service
EOF
  changed_any=$((changed_any | FLOCK_LAST_CHANGED))
  if ! systemd_running; then
    skipped "flock-disks.service enable (systemd is not running here; unit written only)"
    return 0
  fi
  ((changed_any)) && systemctl daemon-reload
  if systemctl is-enabled --quiet flock-disks.service && ((changed_any == 0)); then
    unchanged "flock-disks.service enabled"
  else
    systemctl enable --quiet flock-disks.service
    changed "flock-disks.service enabled"
  fi
}

# provision_docker_group: the operator may use docker without sudo. (Membership
# of the docker group is root-equivalent on this VM; that is the point of a
# dedicated VM.) Takes effect at the next login: `vagrant ssh` again.
provision_docker_group() {
  step "docker group"
  getent group docker >/dev/null || {
    groupadd --system docker
    changed "group docker"
  }
  if [[ -z $FLOCK_USER ]]; then
    skipped "docker group membership (FLOCK_USER is empty)"
  elif ! id "$FLOCK_USER" >/dev/null 2>&1; then
    skipped "docker group membership (user $FLOCK_USER does not exist)"
  elif id -nG "$FLOCK_USER" | tr ' ' '\n' | grep -qx docker; then
    unchanged "user $FLOCK_USER in group docker"
  else
    usermod -aG docker "$FLOCK_USER"
    changed "user $FLOCK_USER in group docker (log in again to use it)"
  fi
}

# default_route_address: the IPv4 address the VM uses towards its NAT gateway,
# which is where VirtualBox/Parallels deliver forwarded ports.
default_route_address() {
  ip -4 -o route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}'
}

# provision_port_forwarders: Vagrant's forwarded ports (host 127.0.0.1:4222 ->
# guest 4222) arrive on the guest's NAT address, while the flock publishes the
# bus on the guest's 127.0.0.1 only, and with userland-proxy off that binding
# exists only as an iptables rule for loopback traffic. A socket-activated
# systemd-socket-proxyd listening on the NAT address relays each connection to
# 127.0.0.1:<port>, so the bus stays off every other interface.
provision_port_forwarders() {
  step "Forwarded-port bridges (${FLOCK_FORWARD_PORTS:-none})"
  local unitdir=/etc/systemd/system port addr units=() unit any_changed=0 p
  local known
  known=$(find "$unitdir" -maxdepth 1 -name 'flock-forward-*.s*' -printf '%f\n' 2>/dev/null | sort || true)
  if [[ -z ${FLOCK_FORWARD_PORTS// /} ]]; then
    addr=
  elif [[ $FLOCK_FORWARD_ADDRESS == auto ]]; then
    addr=$(default_route_address)
    if [[ -z $addr ]]; then
      skipped "forwarded-port bridges (no default route to find the NAT address; set FLOCK_FORWARD_ADDRESS)"
      return 0
    fi
  else
    addr=$FLOCK_FORWARD_ADDRESS
  fi
  [[ -d $unitdir ]] || mkdir -p "$unitdir"
  for port in $FLOCK_FORWARD_PORTS; do
    if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
      die "FLOCK_FORWARD_PORTS must list TCP ports (got '$port')"
    fi
    units+=("flock-forward-$port.socket" "flock-forward-$port.service")
    write_file "$unitdir/flock-forward-$port.socket" 644 root root <<EOF
# Managed by AI Flock provisioning (provision/lib/host.sh).
[Unit]
Description=AI Flock: accept the Vagrant forwarded port $port on $addr

[Socket]
ListenStream=$addr:$port
# The address may appear after this unit starts (DHCP on libvirt).
FreeBind=yes

[Install]
WantedBy=sockets.target
EOF
    any_changed=$((any_changed | FLOCK_LAST_CHANGED))
    write_file "$unitdir/flock-forward-$port.service" 644 root root <<EOF
# Managed by AI Flock provisioning (provision/lib/host.sh).
[Unit]
Description=AI Flock: relay port $port to the bus published on 127.0.0.1:$port
Requires=flock-forward-$port.socket
After=flock-forward-$port.socket

[Service]
ExecStart=/usr/lib/systemd/systemd-socket-proxyd 127.0.0.1:$port
DynamicUser=yes
NoNewPrivileges=yes
CapabilityBoundingSet=
PrivateTmp=yes
PrivateDevices=yes
ProtectSystem=strict
ProtectHome=yes
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
EOF
    any_changed=$((any_changed | FLOCK_LAST_CHANGED))
  done
  # Ports no longer listed: stop and remove their units.
  for unit in $known; do
    for p in "${units[@]}"; do
      [[ $unit == "$p" ]] && continue 2
    done
    if systemd_running; then
      systemctl disable --now --quiet "$unit" 2>/dev/null || true
    fi
    remove_file "$unitdir/$unit"
    any_changed=1
  done
  if ! systemd_running; then
    ((${#units[@]})) && skipped "forwarded-port bridges start (systemd is not running here; units written only)"
    return 0
  fi
  if ((${#units[@]})) && [[ ! -x /usr/lib/systemd/systemd-socket-proxyd ]]; then
    die "/usr/lib/systemd/systemd-socket-proxyd is missing (package systemd); set FLOCK_FORWARD_PORTS= to do without the forwarded-port bridges"
  fi
  if ((any_changed)); then
    systemctl daemon-reload
  fi
  for unit in "${units[@]}"; do
    [[ $unit == *.socket ]] || continue
    if systemctl is-enabled --quiet "$unit" && systemctl is-active --quiet "$unit" && ((any_changed == 0)); then
      unchanged "$unit running"
    else
      # The relay keeps running once activated: stop it so it picks up a
      # changed unit at the next connection.
      systemctl stop "${unit%.socket}.service" 2>/dev/null || true
      systemctl enable --quiet "$unit"
      systemctl restart "$unit"
      changed "$unit enabled and listening"
    fi
  done
}
