package dockerflock

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/infra/gatewayconfig"
	"github.com/ai-flock/ai-flock/protocol"
)

// Host describes where the Docker engine runs, and so where the host
// preparation scripts (directories, ownership, credentials) must run.
type Host struct {
	// DockerHost is the docker:host of the stack: "" or unix://… for a local
	// engine, ssh://user@host[:port] for an engine reached over SSH.
	DockerHost string
}

// Remote reports whether the engine is reached over SSH.
func (h Host) Remote() bool { return strings.HasPrefix(h.DockerHost, "ssh://") }

// ShellCommand runs a script read from stdin as root on the engine's host:
// locally (through sudo -n when not root), or over the same SSH login the
// docker CLI uses for ssh:// engines.
func (h Host) ShellCommand() string {
	const asRoot = `if [ "$(id -u)" -eq 0 ]; then sh -s; else sudo -n sh -s; fi`
	if !h.Remote() {
		return asRoot
	}
	return "ssh -o BatchMode=yes" + h.sshTarget() + " " + shellQuote(asRoot)
}

// sshTarget is " [-p PORT] [user@]host" of an ssh:// engine.
func (h Host) sshTarget() string {
	u, _ := url.Parse(h.DockerHost)
	target := u.Hostname()
	if u.User != nil {
		target = u.User.Username() + "@" + target
	}
	if u.Port() != "" {
		return " -p " + u.Port() + " " + target
	}
	return " " + target
}

// RootCommand runs one inline script as root on the engine's host, like
// ShellCommand but with the script in the command line (it must hold no
// secret) and stdin closed: pulumi-command hands a delete step the stdin of
// its create step.
func (h Host) RootCommand(script string) string {
	q := shellQuote(script)
	local := fmt.Sprintf(`if [ "$(id -u)" -eq 0 ]; then sh -c %s; else sudo -n sh -c %s; fi </dev/null`, q, q)
	if !h.Remote() {
		return local
	}
	return "ssh -n -o BatchMode=yes" + h.sshTarget() + " " + shellQuote(local)
}

// DockerEnv is the environment of docker CLI steps (network connect, update).
func (h Host) DockerEnv() map[string]string {
	if h.DockerHost == "" {
		return map[string]string{}
	}
	return map[string]string{"DOCKER_HOST": h.DockerHost}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// LayoutScript prepares the roots of the shared and state directories. Agents
// and logs are traverse-only (0711): no agent can list who else exists.
func LayoutScript(m flock.Model) string {
	s := m.Shared
	var b strings.Builder
	b.WriteString("set -eu\numask 022\n")
	fmt.Fprintf(&b, "install -d -o 0 -g 0 -m 0755 %s %s\n", s.Root, s.CommonDir())
	fmt.Fprintf(&b, "install -d -o 0 -g 0 -m 0711 %s/agents %s/logs %s %s/creds\n", s.Root, s.Root, s.StateRoot, s.StateRoot)
	fmt.Fprintf(&b, "install -d -o 0 -g 0 -m 0700 %s/disks\n", s.StateRoot)
	bus := s.BusDir()
	fmt.Fprintf(&b, "install -d -o %d -g %d -m 0700 %s %s/config", m.Bus.UID, m.Bus.UID, bus, bus)
	for _, n := range m.Bus.BusNodes() {
		fmt.Fprintf(&b, " %s", BusDataDir(bus, m.Bus.Clustered(), n))
	}
	b.WriteString("\n")
	// The agents' host library: root's alone, replaced by rename.
	lib := AgentLibraryFile(m)
	fmt.Fprintf(&b, "install -d -o 0 -g 0 -m 0700 %s\numask 077\n", path.Dir(lib))
	fmt.Fprintf(&b, "cat > %s.new <<'FLOCK_EOF'\n%sFLOCK_EOF\nmv -f %s.new %s\n", lib, agentLibrary, lib, lib)
	return b.String()
}

// AgentLibraryFile is where the layout step installs the agents' host
// library (agentLibrary), under the state root, which no agent can reach.
func AgentLibraryFile(m flock.Model) string {
	return path.Join(m.Shared.StateRoot, "lib", "agent-prepare.sh")
}

// agentLibrarySum is the library's sha256: each agent's script checks it
// before it sources the file, and carries it, so a new library is a new
// script for every agent (their steps run again, after the layout step).
var agentLibrarySum = fmt.Sprintf("%x", sha256.Sum256([]byte(agentLibrary)))

// AgentCleanupScript removes an agent's credentials from the host when the
// agent is removed or the flock destroyed, and unmounts its directory's and
// its log's filesystems. Their data (the filesystem images) stays: data is
// deleted only by hand.
func AgentCleanupScript(m flock.Model, a flock.Agent) string {
	s := m.Shared
	// <id>.nk: where a flock made before credential directories kept the key.
	legacy := path.Join(s.StateRoot, "creds", a.ID+".nk")
	var b strings.Builder
	fmt.Fprintf(&b, "rm -rf %s; rm -f %s", s.CredsDir(a.ID), legacy)
	for _, d := range []struct{ img, dir string }{{s.DiskImage(a.ID), s.AgentDir(a.ID)}, {s.LogImage(a.ID), s.LogDir(a.ID)}} {
		fmt.Fprintf(&b, "; rm -f %s.target; if mountpoint -q %s; then umount %s || umount -l %s; fi", d.img, d.dir, d.dir, d.dir)
	}
	return b.String()
}

// AgentScript prepares one agent: its private directory (0700, its UID), its
// log file (0600, its UID) and its NATS credentials (0400, its UID). Existing
// data is kept: the script only creates what is missing and fixes ownership.
// The seed makes the script a secret; it travels on stdin, never argv.
//
// Both the directory and the log file live on filesystems of their own
// (diskMiB and flock.LogDiskMiB), so nothing the agent can write takes the
// host's disk: the log is not a host file its UID could grow at will.
//
// It runs as root and never follows a path the agent controls: it touches
// only the agent's directory itself and its log file, whose parents are
// root's (the agent cannot swap them for a symlink), and refuses either if it
// is not what it should be. Inside its directory the agent owns everything;
// the runtime makes its tasks/ and inbox/ itself, as the agent's user.
func AgentScript(m flock.Model, a flock.Agent, seed string) string {
	s := m.Shared
	lib := AgentLibraryFile(m)
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	// The shared part (quota filesystems) is the host library the layout step
	// installed: the state Pulumi saves after every step holds it once, not
	// once per agent (twice, encrypted, as this script is).
	fmt.Fprintf(&b, "echo '%s  %s' | sha256sum -c --status || { echo \"flock: %s is missing or not this flock's: the host layout step installs it: run pulumi up --replace with the URN of the <flock>-host-layout step (pulumi stack --show-urns)\" >&2; exit 1; }\n. %s\n", agentLibrarySum, lib, lib, lib)
	fmt.Fprintf(&b, "flock_disk %s %s %d %d %d diskMiB\n", s.AgentDir(a.ID), s.DiskImage(a.ID), int64(a.Limits.DiskMiB)<<20, a.UID, a.GID)
	fmt.Fprintf(&b, "chown %d:%d \"$dir\"\nchmod 0700 \"$dir\"\n", a.UID, a.GID)
	// The log's filesystem is root's; the agent owns only the one file in it,
	// and its container mounts only that file.
	fmt.Fprintf(&b, "flock_disk %s %s %d 0 0 %s\n", s.LogDir(a.ID), s.LogImage(a.ID), int64(flock.LogDiskMiB)<<20, shellQuote("the log filesystem size"))
	b.WriteString("chmod 0755 \"$dir\"\n")
	fmt.Fprintf(&b, "log=%s\n", s.LogFile(a.ID))
	b.WriteString(`if [ -L "$log" ]; then refuse "$log" "a symbolic link"; fi` + "\n")
	b.WriteString(`if [ -e "$log" ] && [ ! -f "$log" ]; then refuse "$log" "not a regular file"; fi` + "\n")
	b.WriteString(`[ -e "$log" ] || : > "$log"` + "\n")
	fmt.Fprintf(&b, "chown -h %d:%d \"$log\"\nchmod 0600 \"$log\"\n", a.UID, a.GID)
	// A log from before log filesystems: its newest MiB moves in, the
	// unbounded host file goes.
	fmt.Fprintf(&b, "old=%s\n", s.LegacyLogFile(a.ID))
	b.WriteString(`if [ -f "$old" ] && [ ! -L "$old" ]; then tail -c 1048576 "$old" >> "$log" || true; rm -f "$old"; fi` + "\n")
	// The key is replaced by rename inside its own directory, which the
	// container mounts: a running agent sees the new file (and reconnects
	// with it), never a half-written one.
	fmt.Fprintf(&b, "install -d -o 0 -g 0 -m 0755 %s\nrm -f %s/%s.nk\n", s.CredsDir(a.ID), path.Join(s.StateRoot, "creds"), a.ID)
	creds := s.CredsFile(a.ID)
	fmt.Fprintf(&b, "cat > %s.new <<'FLOCK_SEED'\n%s\nFLOCK_SEED\n", creds, seed)
	fmt.Fprintf(&b, "chown %d:%d %s.new\nchmod 0400 %s.new\nmv -f %s.new %s\n", a.UID, a.GID, creds, creds, creds, creds)
	return b.String()
}

// agentLibrary is the agents' host library (functions only; every agent's
// prepare script sources it). flock_disk DIR IMG BYTES UID GID KEY puts a
// directory ($dir, whose parent is root's) on a filesystem of its own: an
// ext4 image of BYTES whose root is UID:GID's, allocated in full up front (a
// write past it fails with ENOSPC there alone, and never takes the host's
// disk) and kept so on every run (holes filled), loop-mounted
// nosuid,nodev,noinit_itable. Under the mount the directory is root's with
// mode 0000, so if the image is ever not mounted (a host reboot) nothing can
// be written there rather than written without a bound. Files of a
// directory that had none (an older flock) move into the image. A larger
// size grows the filesystem: online where the host allows it, else when it
// is next mounted; a smaller one is refused (ext4 cannot shrink online); KEY
// names the setting in that error. It leaves $dir, $img and $want set.
//
// Inode tables and journal are zeroed by mkfs (with fallocate's zero-range,
// which keeps the blocks), not lazily after the mount: the kernel's lazy
// zeroing goes through the loop device, which punches holes in the image
// and hands the agent's reserved blocks back to the host. allocate runs on
// every prepare, not only to grow: it also fills any hole punched in the
// image (by an older flock's lazy zeroing, or an online resize zeroing
// through the loop device), so all the bytes stay the agent's.
const agentLibrary = `# ai-flock: the agents' host preparation, installed by the host layout step.
refuse() { echo "flock: refusing to prepare $1: $2 (an agent may have replaced it; inspect it by hand)" >&2; exit 1; }
fs_bytes() { dumpe2fs -h "$img" 2>/dev/null | awk -F: '/^Block count/ {c=$2} /^Block size/ {s=$2} END {print c*s}'; }
allocate() { fallocate -l "$want" "$img" || { echo "flock: cannot allocate $want bytes for $img (is the disk full?)" >&2; exit 1; }; }
flock_disk() {
dir=$1 img=$2 want=$3 owner=$4:$5 key=$6
if [ -L "$dir" ]; then refuse "$dir" "a symbolic link"; fi
if [ -e "$dir" ] && [ ! -d "$dir" ]; then refuse "$dir" "not a directory"; fi
if [ -L "$img" ] || { [ -e "$img" ] && [ ! -f "$img" ]; }; then refuse "$img" "not a regular file"; fi
if [ ! -e "$img" ]; then
  rm -f "$img.new"
  fallocate -l "$want" "$img.new" || { rm -f "$img.new"; echo "flock: cannot allocate $want bytes for $img (is the disk full?)" >&2; exit 1; }
  mkfs.ext4 -q -F -m 0 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0,root_owner=$owner "$img.new"
  mv -f "$img.new" "$img"
fi
# Where provision/flock-mount-disks.sh mounts it again after a reboot.
printf '%s\n' "$dir" > "$img.target"
have=$(stat -c %s "$img")
if [ "$want" -lt "$have" ]; then
  echo "flock: $img is $have bytes and $key asks for $want: a filesystem cannot shrink; set it back to at least $((have / 1048576)) MiB, or move the files out and delete the image" >&2
  exit 1
fi
allocate
if ! mountpoint -q "$dir"; then
  old=""
  if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ]; then old="$dir.unquoted.$$"; mv "$dir" "$old"; fi
  install -d -o 0 -g 0 -m 0000 "$dir"
  if [ "$(fs_bytes)" -lt "$want" ]; then
    { e2fsck -f -p "$img" >/dev/null; [ $? -le 1 ]; } && resize2fs "$img" >/dev/null 2>&1 || { echo "flock: cannot grow the filesystem in $img" >&2; exit 1; }
  fi
  mount -o loop,nosuid,nodev,noinit_itable "$img" "$dir"
  if [ -n "$old" ]; then
    cp -a "$old/." "$dir/" || { echo "flock: the files of $old do not fit in $img ($want bytes): raise $key; they are left in $old" >&2; exit 1; }
    rm -rf "$old"
  fi
elif [ "$(fs_bytes)" -lt "$want" ]; then
  dev=$(findmnt -n -o SOURCE --target "$dir")
  losetup -c "$dev" && resize2fs "$dev" >/dev/null 2>&1 ||
    echo "flock: this host refuses to grow a mounted filesystem: $dir grows to $want bytes when it is next mounted" >&2
  allocate
fi
}
`

// BusConfigScript installs the rendered bus config and topology (public keys
// only: nothing secret) and asks a running bus to reload them. Files are
// replaced by rename inside the mounted directory, so the bus never reads a
// half-written file.
func BusConfigScript(m flock.Model, confs [][]byte, topology []byte, busContainers []string) string {
	dir := m.Shared.BusDir() + "/config"
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	type file struct {
		name string
		data []byte
	}
	var files []file
	for i, conf := range confs {
		files = append(files, file{BusConfigFile(m.Bus.Clustered(), i+1), conf})
	}
	for _, f := range append(files, file{"topology.json", topology}) {
		fmt.Fprintf(&b, "cat > %s/%s.new <<'FLOCK_EOF'\n%s\nFLOCK_EOF\n", dir, f.name, f.data)
		fmt.Fprintf(&b, "chown %d:%d %s/%s.new\nmv -f %s/%s.new %s/%s\n", m.Bus.UID, m.Bus.UID, dir, f.name, dir, f.name, dir, f.name)
	}
	// A running bus reloads users, permissions and consumers without a restart.
	for _, c := range busContainers {
		fmt.Fprintf(&b, "if command -v docker >/dev/null 2>&1; then docker kill -s HUP %s >/dev/null 2>&1 || true; fi\n", c)
	}
	return b.String()
}

// GatewayDir is the host directory mounted read-only at
// protocol.GatewayConfigDir in the gateway: its config, its bus key and the
// upstreams' keys, which only the gateway's UID can read.
func GatewayDir(m flock.Model) string { return path.Join(m.Shared.StateRoot, "gateway") }

// GatewayScript installs the gateway's config (no secret), its bus key and
// the upstreams' keys (0400, the gateway's UID; base64 on stdin, never argv),
// removes the keys of upstreams no longer listed, and asks a running gateway
// to reload them. Files are replaced by rename: the gateway never reads half
// a file.
func GatewayScript(m flock.Model, conf []byte, seed string, keys map[string]string, container string) string {
	dir, uid := GatewayDir(m), m.Gateway.UID
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	fmt.Fprintf(&b, "install -d -o 0 -g 0 -m 0755 %s\ninstall -d -o %d -g %d -m 0500 %s/keys\n", dir, uid, uid, dir)
	put := func(name, mode string, owner int, data []byte) {
		fmt.Fprintf(&b, "base64 -d > %s/%s.new <<'FLOCK_EOF'\n%s\nFLOCK_EOF\n", dir, name, base64.StdEncoding.EncodeToString(data))
		fmt.Fprintf(&b, "chown %d:%d %s/%s.new\nchmod %s %s/%s.new\nmv -f %s/%s.new %s/%s\n", owner, owner, dir, name, mode, dir, name, dir, name, dir, name)
	}
	put("gateway.json", "0444", 0, conf)
	put("nats.nk", "0400", uid, []byte(seed))
	names := slices.Sorted(maps.Keys(keys))
	for _, name := range names {
		put("keys/"+name, "0400", uid, []byte(keys[name]))
	}
	// What the config no longer names leaves the host.
	fmt.Fprintf(&b, "for f in %s/keys/*; do case \"${f##*/}\" in %s) ;; *) rm -f \"$f\" ;; esac; done\n", dir, strings.Join(append(names, "''"), "|"))
	fmt.Fprintf(&b, "if command -v docker >/dev/null 2>&1; then docker kill -s HUP %s >/dev/null 2>&1 || true; fi\n", container)
	return b.String()
}

// GatewayKeyFiles are the files of the gateway's keys directory: each
// upstream's key under its name, each egress credential under
// egress.<its secret key>, and the egress CA's seed.
func GatewayKeyFiles(m flock.Model, r flock.Rendered) map[string]string {
	files := map[string]string{}
	for _, up := range m.Gateway.Upstreams {
		files[up.Name] = r.GatewayKeys[up.Name]
	}
	for name, v := range r.EgressSecrets {
		files[gatewayconfig.EgressCredentialFile(name)] = v
	}
	if r.EgressCASeed != "" {
		files[protocol.GatewayEgressCASeed] = r.EgressCASeed
	}
	return files
}

// GatewayCleanupScript takes the gateway's keys off the host when the gateway
// is removed or the flock destroyed.
func GatewayCleanupScript(m flock.Model) string {
	return "rm -rf " + GatewayDir(m)
}
