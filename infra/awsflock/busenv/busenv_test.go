package busenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func envOf(prefix string, parts []string) map[string]string {
	env := map[string]string{PartsVar(prefix): strconv.Itoa(len(parts))}
	for i, p := range parts {
		env[PartVar(prefix, i+1)] = p
	}
	return env
}

func TestRoundTrip(t *testing.T) {
	// Incompressible data forces several parts.
	big := make([]byte, 200_000)
	rand.Read(big)
	data := []byte(hex.EncodeToString(big))
	for _, in := range [][]byte{[]byte(`{"listen":"0.0.0.0:4222"}`), data} {
		parts, err := Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if len(p) > MaxPart || len(p) == 0 {
				t.Fatalf("part of %d characters", len(p))
			}
		}
		again, _ := Encode(in)
		if len(again) != len(parts) || again[0] != parts[0] {
			t.Fatal("encoding is not deterministic")
		}
		env := envOf(ConfigPrefix, parts)
		out, ok, err := Decode(ConfigPrefix, func(k string) string { return env[k] })
		if err != nil || !ok || !bytes.Equal(out, in) {
			t.Fatalf("round trip of %d bytes in %d parts: ok=%v err=%v", len(in), len(parts), ok, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, ok, err := Decode(ConfigPrefix, func(string) string { return "" }); ok || err != nil {
		t.Fatalf("unset: ok=%v err=%v, want not ok and no error", ok, err)
	}
	parts, _ := Encode([]byte("hello"))
	for name, env := range map[string]map[string]string{
		"missing part": {PartsVar(ConfigPrefix): "2", PartVar(ConfigPrefix, 1): parts[0]},
		"bad count":    {PartsVar(ConfigPrefix): "many"},
		"not base64":   {PartsVar(ConfigPrefix): "1", PartVar(ConfigPrefix, 1): "!!!"},
		"not gzip":     {PartsVar(ConfigPrefix): "1", PartVar(ConfigPrefix, 1): "aGVsbG8="},
	} {
		if _, ok, err := Decode(ConfigPrefix, func(k string) string { return env[k] }); !ok || err == nil {
			t.Errorf("%s: ok=%v err=%v, want an error", name, ok, err)
		}
	}
}

func TestMaterialize(t *testing.T) {
	conf, _ := Encode([]byte("conf"))
	topo, _ := Encode([]byte("topo"))
	env := envOf(ConfigPrefix, conf)
	for k, v := range envOf(TopologyPrefix, topo) {
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
	delete(env, PartsVar(TopologyPrefix))
	if _, _, _, err := Materialize(dir, func(k string) string { return env[k] }); err == nil {
		t.Error("config without topology accepted")
	}
	if _, _, ok, err := Materialize(dir, func(string) string { return "" }); ok || err != nil {
		t.Errorf("empty environment: ok=%v err=%v", ok, err)
	}
}
