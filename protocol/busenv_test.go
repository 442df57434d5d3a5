package protocol

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"testing"
)

func envOf(prefix string, parts []string) map[string]string {
	env := map[string]string{EnvPartsVar(prefix): strconv.Itoa(len(parts))}
	for i, p := range parts {
		env[EnvPartVar(prefix, i+1)] = p
	}
	return env
}

func TestRoundTrip(t *testing.T) {
	// Incompressible data forces several parts.
	big := make([]byte, 200_000)
	rand.Read(big)
	data := []byte(hex.EncodeToString(big))
	for _, in := range [][]byte{[]byte(`{"listen":"0.0.0.0:4222"}`), data} {
		parts, err := EncodeEnv(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if len(p) > EnvMaxPart || len(p) == 0 {
				t.Fatalf("part of %d characters", len(p))
			}
		}
		again, _ := EncodeEnv(in)
		if len(again) != len(parts) || again[0] != parts[0] {
			t.Fatal("encoding is not deterministic")
		}
		env := envOf(EnvBusConfig, parts)
		out, ok, err := DecodeEnv(EnvBusConfig, func(k string) string { return env[k] })
		if err != nil || !ok || !bytes.Equal(out, in) {
			t.Fatalf("round trip of %d bytes in %d parts: ok=%v err=%v", len(in), len(parts), ok, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, ok, err := DecodeEnv(EnvBusConfig, func(string) string { return "" }); ok || err != nil {
		t.Fatalf("unset: ok=%v err=%v, want not ok and no error", ok, err)
	}
	parts, _ := EncodeEnv([]byte("hello"))
	for name, env := range map[string]map[string]string{
		"missing part": {EnvPartsVar(EnvBusConfig): "2", EnvPartVar(EnvBusConfig, 1): parts[0]},
		"bad count":    {EnvPartsVar(EnvBusConfig): "many"},
		"not base64":   {EnvPartsVar(EnvBusConfig): "1", EnvPartVar(EnvBusConfig, 1): "!!!"},
		"not gzip":     {EnvPartsVar(EnvBusConfig): "1", EnvPartVar(EnvBusConfig, 1): "aGVsbG8="},
	} {
		if _, ok, err := DecodeEnv(EnvBusConfig, func(k string) string { return env[k] }); !ok || err == nil {
			t.Errorf("%s: ok=%v err=%v, want an error", name, ok, err)
		}
	}
}
