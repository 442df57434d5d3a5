package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// flock:program on the real engine: each agent runs its program in its own
// directory, as its own UID, with the FLOCK_* variables and no key in its
// environment; the program's output is in the agent's program.log.
func TestAgentProgramRunsInTheContainer(t *testing.T) {
	need(t)
	for n := 1; n <= agents; n++ {
		id := fmt.Sprintf("agent-%d", n)
		logPath := filepath.Join(shared, "agents", id, "program.log")
		var out string
		deadline := time.Now().Add(time.Minute)
		for {
			b, err := os.ReadFile(logPath)
			out = string(b)
			if err == nil && strings.Contains(out, "FLOCK_AGENT_ID="+id+"\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no program output in %s after a minute (%v): %q", id, logPath, err, out)
			}
			time.Sleep(250 * time.Millisecond)
		}
		for _, want := range []string{"FLOCK_AGENT_DIR=/shared/agents/" + id + "\n", "FLOCK_NKEY_FILE=", "FLOCK_NATS_URL=nats://"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the program's environment lacks %q:\n%s", id, want, out)
			}
		}
		if strings.Contains(out, "NATS_NKEY_SEED") || strings.Contains(out, "=SU") {
			t.Errorf("%s: a key in the program's environment", id)
		}
		st, err := os.Stat(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != uint32(20000+n) {
			t.Errorf("%s: program.log owned by uid %d, want the agent's %d", id, uid, 20000+n)
		}
	}
}
