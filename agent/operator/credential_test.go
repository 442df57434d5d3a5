package operator

import (
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestCredential(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	if nk, err := (Credential{Seed: string(seed) + "\n"}).option(); err != nil || nk == nil {
		t.Fatalf("a seed from the environment (trailing newline and all): %v", err)
	}
	if nk, err := (Credential{}).option(); err != nil || nk != nil {
		t.Fatalf("no credential: option %v, error %v; want none", nk != nil, err)
	}
	if _, err := (Credential{File: "/x.nk", Seed: string(seed)}).option(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("a file and a seed: %v, want a refusal", err)
	}
	// A malformed seed is refused without echoing it (it may be a real secret, mangled).
	bad := "SUAMALFORMEDSECRETVALUE"
	_, err = (Credential{Seed: bad}).option()
	if err == nil || strings.Contains(err.Error(), bad) {
		t.Fatalf("malformed seed: error %v; want a refusal that does not repeat the value", err)
	}
}
