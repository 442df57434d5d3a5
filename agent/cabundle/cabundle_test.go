package cabundle

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/protocol/egressca"
)

func ca(t *testing.T, b byte, name string) *egressca.CA {
	t.Helper()
	c, err := egressca.New(bytes.Repeat([]byte{b}, egressca.SeedSize), name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The bundle is the image's roots and the flock's CA: a pool made from it
// verifies a leaf of either.
func TestWriteJoinsTheSystemRootsAndTheFlockCA(t *testing.T) {
	dir := t.TempDir()
	system, flockCA := ca(t, 1, "system"), ca(t, 2, "flock")
	sys := filepath.Join(dir, "system.crt")
	os.WriteFile(sys, []byte(strings.TrimSuffix(system.PEM(), "\n")), 0o644) // no final newline
	out := filepath.Join(dir, "run", "flock", "ca-bundle.pem")
	used, err := Write(out, flockCA.PEM(), []string{filepath.Join(dir, "absent"), sys})
	if err != nil || used != sys {
		t.Fatalf("Write: %q %v", used, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("the bundle does not parse")
	}
	for _, c := range []*egressca.CA{system, flockCA} {
		leaf, err := c.Leaf("example.com")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(leaf.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"}); err != nil {
			t.Errorf("a leaf of %s does not verify against the bundle: %v", c.Certificate().Subject, err)
		}
	}
	// No system roots: the flock's CA alone, and it says so.
	if used, err := Write(out, flockCA.PEM(), []string{filepath.Join(dir, "absent")}); err != nil || used != "" {
		t.Errorf("without system roots: %q %v", used, err)
	}
	if b, _ := os.ReadFile(out); string(b) != flockCA.PEM() {
		t.Errorf("the bundle without system roots: %q", b)
	}
}

func TestWriteRefusesWhatIsNotACertificate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "b.pem")
	for name, pem := range map[string]string{
		"empty":       "",
		"garbage":     "not pem",
		"private key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"trailing":    ca(t, 3, "x").PEM() + "junk",
	} {
		if _, err := Write(out, pem, nil); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused bundle left a file: %v", err)
	}
}
