package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// A rotated key reaches a running agent: its new seed replaces the old one
// by rename in its credentials directory (as the prepare step does) and the
// bus reloads with the new public key (as the bus config step does). The
// agent, whose container mounts that directory, reconnects with the new key
// and takes tasks again, without its container restarting.
func TestKeyRotationReachesRunningAgent(t *testing.T) {
	f := needReplay(t, "changes an agent's key: replay only")
	a := f.agents[2]
	before := inspect(t, container(a))["State"].(map[string]any)["StartedAt"]

	old, err := credentials.Derive([]byte(capture.TestSecret), protocol.AgentUser(a))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()

	key := filepath.Join(f.stateRoot, "creds", a, "nats.nk")
	replaceFile(t, key, append(seed, '\n'))
	conf := filepath.Join(f.stateRoot, "bus", "config", "nats.conf")
	raw, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), old.Public); n != 1 {
		t.Fatalf("%s's public key appears %d times in the bus config", a, n)
	}
	replaceFile(t, conf, []byte(strings.Replace(string(raw), old.Public, pub, 1)))
	start := time.Now()
	if err := f.engine.Kill(context.Background(), f.name+"-bus", "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, a)
	t.Logf("%s took a task with its rotated key %s after the bus reloaded", a, time.Since(start).Round(time.Millisecond))
	if after := inspect(t, container(a))["State"].(map[string]any)["StartedAt"]; after != before {
		t.Errorf("%s's container restarted (started %v, then %v): the rotation should reach the running agent", a, before, after)
	}
}

// replaceFile writes data beside p and renames it over p, keeping p's owner
// and mode, as the host steps replace files.
func replaceFile(t *testing.T, p string, data []byte) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if err := os.Chown(tmp, int(sys.Uid), int(sys.Gid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, st.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}
