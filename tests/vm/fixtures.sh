#!/usr/bin/env bash
# Test fixtures inside the VM for tests/vm/run.sh (run as root there), not
# provisioning: a busybox image built FROM scratch out of Debian's
# busybox-static (no registry needed) for verify-vm.sh's container checks, and
# a stand-in for the bus's NATS monitoring port on 127.0.0.1:8222 (verify-vm.sh
# runs before the flock is deployed) so the forwarded-port bridge is checked end
# to end; run.sh removes it before deploying the flock.
#
#   sudo /vagrant/tests/vm/fixtures.sh [IMAGE]
set -euo pipefail

IMAGE=${1:-flock-verify:busybox}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Downloaded and unpacked, not installed: installing would rebuild the
# initramfs (busybox's hook), minutes under software emulation.
(cd "$work" && apt-get download -qq -o APT::Sandbox::User=root busybox-static >/dev/null 2>&1) || {
  apt-get update -qq
  (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root busybox-static >/dev/null)
}
dpkg-deb -x "$work"/busybox-static_*.deb "$work/deb"
root=$work/root
mkdir -p "$root/bin" "$root/www"
cp "$work/deb/bin/busybox" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
  [[ $applet == busybox ]] || ln -s busybox "$root/bin/$applet"
done
echo ok >"$root/www/healthz"
tar -C "$root" -cf - . | docker import -c 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null
echo "fixtures: image $IMAGE"

docker rm -f flock-verify-monitor >/dev/null 2>&1 || true
docker run -d --name flock-verify-monitor -p 127.0.0.1:8222:80 "$IMAGE" httpd -f -p 80 -h /www >/dev/null
for _ in $(seq 1 30); do
  if curl -fsS -o /dev/null http://127.0.0.1:8222/healthz; then
    echo "fixtures: monitoring stand-in answers on 127.0.0.1:8222"
    exit 0
  fi
  sleep 1
done
echo "fixtures: the monitoring stand-in does not answer on 127.0.0.1:8222" >&2
exit 1
