package dockerflock

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// Host describes where the Docker engine runs, and so where the host
// preparation scripts (directories, ownership, credentials) must run.
type Host struct {
	// DockerHost is the docker:host of the stack: "" or unix://… for a local
	// engine, ssh://user@host[:port] for an engine reached over SSH.
	DockerHost string
}

// ParseHost checks a docker:host value. tcp:// engines are refused: the
// shared directories must be prepared on the engine's own filesystem, which
// only a local engine or an SSH login can reach.
func ParseHost(dockerHost string) (Host, error) {
	switch {
	case dockerHost == "", strings.HasPrefix(dockerHost, "unix://"):
		return Host{DockerHost: dockerHost}, nil
	case strings.HasPrefix(dockerHost, "ssh://"):
		u, err := url.Parse(dockerHost)
		if err != nil || u.Hostname() == "" || u.Path != "" {
			return Host{}, fmt.Errorf("docker:host: must be ssh://[user@]host[:port] (got %q)", dockerHost)
		}
		return Host{DockerHost: dockerHost}, nil
	default:
		return Host{}, fmt.Errorf("docker:host: must be empty, unix://… or ssh://[user@]host[:port]; other engines cannot have the shared directory prepared on their filesystem (got %q)", dockerHost)
	}
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
	bus := s.BusDir()
	fmt.Fprintf(&b, "install -d -o %d -g %d -m 0700 %s %s/config %s/data\n", m.Bus.UID, m.Bus.UID, bus, bus, bus)
	return b.String()
}

// AgentCleanupScript removes an agent's credentials from the host when the
// agent is removed or the flock destroyed. Its directory and log stay: data
// is deleted only by hand.
func AgentCleanupScript(m flock.Model, a flock.Agent) string {
	creds := m.Shared.CredsFile(a.ID)
	return fmt.Sprintf("rm -f %s %s.new", creds, creds)
}

// AgentScript prepares one agent: its private directory (0700, its UID), its
// log file (0600, its UID) and its NATS credentials (0400, its UID). Existing
// data is kept: the script only creates what is missing and fixes ownership.
// The seed makes the script a secret; it travels on stdin, never argv.
//
// It runs as root and never follows a path the agent controls: it touches
// only the agent's directory itself and its log file, whose parents are
// root's (the agent cannot swap them for a symlink), and refuses either if it
// is not what it should be. Inside its directory the agent owns everything;
// the runtime makes its tasks/ and inbox/ itself, as the agent's user.
func AgentScript(m flock.Model, a flock.Agent, seed string) string {
	s := m.Shared
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	b.WriteString(`refuse() { echo "flock: refusing to prepare $1: $2 (an agent may have replaced it; inspect it by hand)" >&2; exit 1; }` + "\n")
	fmt.Fprintf(&b, "dir=%s\n", s.AgentDir(a.ID))
	b.WriteString(`if [ -L "$dir" ]; then refuse "$dir" "a symbolic link"; fi` + "\n")
	b.WriteString(`if [ -e "$dir" ] && [ ! -d "$dir" ]; then refuse "$dir" "not a directory"; fi` + "\n")
	fmt.Fprintf(&b, "install -d -o %d -g %d -m 0700 \"$dir\"\n", a.UID, a.GID)
	fmt.Fprintf(&b, "log=%s\n", s.LogFile(a.ID))
	b.WriteString(`if [ -L "$log" ]; then refuse "$log" "a symbolic link"; fi` + "\n")
	b.WriteString(`if [ -e "$log" ] && [ ! -f "$log" ]; then refuse "$log" "not a regular file"; fi` + "\n")
	b.WriteString(`[ -e "$log" ] || : > "$log"` + "\n")
	fmt.Fprintf(&b, "chown -h %d:%d \"$log\"\nchmod 0600 \"$log\"\n", a.UID, a.GID)
	creds := s.CredsFile(a.ID)
	fmt.Fprintf(&b, "cat > %s.new <<'FLOCK_SEED'\n%s\nFLOCK_SEED\n", creds, seed)
	fmt.Fprintf(&b, "chown %d:%d %s.new\nchmod 0400 %s.new\nmv -f %s.new %s\n", a.UID, a.GID, creds, creds, creds, creds)
	return b.String()
}

// BusConfigScript installs the rendered bus config and topology (public keys
// only: nothing secret) and asks a running bus to reload them. Files are
// replaced by rename inside the mounted directory, so the bus never reads a
// half-written file.
func BusConfigScript(m flock.Model, conf, topology []byte, busContainer string) string {
	dir := m.Shared.BusDir() + "/config"
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	for _, f := range []struct {
		name string
		data []byte
	}{{"nats.conf", conf}, {"topology.json", topology}} {
		fmt.Fprintf(&b, "cat > %s/%s.new <<'FLOCK_EOF'\n%s\nFLOCK_EOF\n", dir, f.name, f.data)
		fmt.Fprintf(&b, "chown %d:%d %s/%s.new\nmv -f %s/%s.new %s/%s\n", m.Bus.UID, m.Bus.UID, dir, f.name, dir, f.name, dir, f.name)
	}
	// A running bus reloads users, permissions and consumers without a restart.
	fmt.Fprintf(&b, "if command -v docker >/dev/null 2>&1; then docker kill -s HUP %s >/dev/null 2>&1 || true; fi\n", busContainer)
	return b.String()
}
