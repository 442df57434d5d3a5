package egressca

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"
)

func seed(b byte) []byte { return bytes.Repeat([]byte{b}, SeedSize) }

func TestTheCAIsTheSameEveryTimeItIsBuilt(t *testing.T) {
	a, err := CertPEM(seed(1), "flock")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CertPEM(seed(1), "flock")
	if a != b {
		t.Fatal("two builds from one seed differ: every up would replace every agent")
	}
	if c, _ := CertPEM(seed(2), "flock"); c == a {
		t.Fatal("another seed gives the same CA")
	}
	if c, _ := CertPEM(seed(1), "other"); c == a {
		t.Fatal("another flock gives the same CA")
	}
	if _, err := New(seed(1)[:8], "flock"); err == nil {
		t.Fatal("a short seed is accepted")
	}
}

// A TLS client that trusts only the CA accepts the gateway's leaf for the
// host it asked, and refuses it for any other name.
func TestLeavesVerifyForTheirHostOnly(t *testing.T) {
	ca, err := New(seed(3), "flock")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := tls.Server(c, &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
					return ca.Leaf(h.ServerName)
				}})
				_ = s.Handshake()
				_, _ = s.Write([]byte("x"))
			}()
		}
	}()
	dial := func(sni, verify string) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: sni, RootCAs: roots,
			VerifyConnection: func(cs tls.ConnectionState) error {
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: verify, Roots: roots})
				return err
			}})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("github.com", "github.com"); err != nil {
		t.Fatalf("leaf for github.com: %v", err)
	}
	if err := dial("github.com", "evil.example"); err == nil {
		t.Fatal("github.com's leaf verifies for another name")
	}
	if n := ca.CachedLeaves(); n != 1 {
		t.Fatalf("cached %d leaves after two handshakes for one host", n)
	}
}

func TestLeafCacheIsBoundedAndReissues(t *testing.T) {
	ca, err := New(seed(4), "flock")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	first, _ := ca.Leaf("a.example")
	for i := range MaxCachedLeaves + 10 {
		if _, err := ca.Leaf(fmt.Sprintf("h%d.example", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := ca.CachedLeaves(); n != MaxCachedLeaves {
		t.Fatalf("cache holds %d leaves, bound %d", n, MaxCachedLeaves)
	}
	again, _ := ca.Leaf("h5000.example")
	now = now.Add(leafReissue + time.Minute)
	later, _ := ca.Leaf("h5000.example")
	if again == later {
		t.Fatal("a day-old leaf is not issued again")
	}
	if first == nil {
		t.Fatal("no first leaf")
	}
}
