package bus

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
)

func envOf(prefix string, parts []string) map[string]string {
	env := map[string]string{protocol.EnvPartsVar(prefix): strconv.Itoa(len(parts))}
	for i, p := range parts {
		env[protocol.EnvPartVar(prefix, i+1)] = p
	}
	return env
}

func TestMaterialize(t *testing.T) {
	conf, _ := protocol.EncodeEnv([]byte("conf"))
	topo, _ := protocol.EncodeEnv([]byte("topo"))
	env := envOf(protocol.EnvBusConfig, conf)
	for k, v := range envOf(protocol.EnvBusTopology, topo) {
		env[k] = v
	}
	dir := filepath.Join(t.TempDir(), "bus")
	cf, tf, ok, err := Materialize(dir, func(k string) string { return env[k] })
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	for path, want := range map[string]string{cf: "conf", tf: "topo"} {
		b, err := os.ReadFile(path)
		info, _ := os.Stat(path)
		if err != nil || string(b) != want || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %q %v %v", path, b, err, info.Mode())
		}
	}
	delete(env, protocol.EnvPartsVar(protocol.EnvBusTopology))
	if _, _, _, err := Materialize(dir, func(k string) string { return env[k] }); err == nil {
		t.Error("config without topology accepted")
	}
	if _, _, ok, err := Materialize(dir, func(string) string { return "" }); ok || err != nil {
		t.Errorf("empty environment: ok=%v err=%v", ok, err)
	}
}
