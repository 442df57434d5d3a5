package dockerflock

import (
	"errors"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

func TestConfigValidate(t *testing.T) {
	a, err := Config{}.Validate(flock.Model{Name: "f"}, "")
	errs := protocol.Problems(err)
	if len(errs) > 0 || a.AgentContext != "agent" || a.Host.Remote() || a.Model.Name != "f" {
		t.Fatalf("defaults: %+v %v", a, errs)
	}
	a, err = Config{BaseImage: "scratch", AgentContext: "ctx"}.Validate(flock.Model{}, "ssh://flock@vm:2222")
	errs = protocol.Problems(err)
	if len(errs) > 0 || a.AgentContext != "ctx" || a.BaseImage != "scratch" || !a.Host.Remote() {
		t.Fatalf("set: %+v %v", a, errs)
	}
	for _, host := range []string{"tcp://10.0.0.5:2375", "ssh://", "ssh://vm/path", "npipe:////./pipe/docker"} {
		_, err := Config{}.Validate(flock.Model{}, host)
		errs := protocol.Problems(err)
		var fe *flock.Error
		if len(errs) != 1 || !errors.As(errs[0], &fe) || fe.Key != HostKey {
			t.Errorf("docker:host %q: %v, want one error naming %s", host, errs, HostKey)
		}
	}
}
