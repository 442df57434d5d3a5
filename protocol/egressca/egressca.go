// Package egressca is the flock's egress certificate authority: the CA the
// gateway issues leaf certificates from when it terminates an agent's TLS
// to a brokered host, and that agents trust beside the system roots. The
// stacks and the gateway both build it from one seed (derived from
// flock:busSecret), and building it is deterministic (an Ed25519 key, an
// Ed25519 signature, fixed fields), so every `pulumi up` renders the same
// certificate and no agent is replaced for it. Only the gateway holds the
// seed; agents get the certificate alone.
package egressca

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// SeedSize is the seed's length in bytes.
const SeedSize = ed25519.SeedSize

// The CA's validity is fixed so that it is the same every time it is built.
var (
	notBefore = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2046, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Leaf certificates live a week and are issued again after a day.
const (
	leafLifetime = 7 * 24 * time.Hour
	leafReissue  = 24 * time.Hour
	// MaxCachedLeaves bounds the cache: a wildcard rule lets an agent name
	// any number of hosts.
	MaxCachedLeaves = 4096
)

// CA is the flock's egress CA.
type CA struct {
	cert    *x509.Certificate
	der     []byte
	key     ed25519.PrivateKey
	leafKey *ecdsa.PrivateKey // one key for every leaf of this process

	mu     sync.Mutex
	leaves map[string]*list.Element
	order  *list.List // of *leaf, most recently used first
	now    func() time.Time
}

type leaf struct {
	host   string
	cert   *tls.Certificate
	issued time.Time
}

// New builds flock's CA from seed.
func New(seed []byte, flock string) (*CA, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("egressca: the seed must be %d bytes (got %d)", SeedSize, len(seed))
	}
	if flock == "" {
		return nil, errors.New("egressca: no flock name")
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(pub)
	serial := new(big.Int).SetBytes(sum[:16])
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"AI Flock"}, CommonName: "AI Flock egress CA for " + flock},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		SubjectKeyId:          sum[16:],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, fmt.Errorf("egressca: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egressca: %w", err)
	}
	return &CA{cert: cert, der: der, key: key, leaves: map[string]*list.Element{}, order: list.New(), now: time.Now}, nil
}

// CertPEM is the CA certificate, what agents trust.
func CertPEM(seed []byte, flock string) (string, error) {
	ca, err := New(seed, flock)
	if err != nil {
		return "", err
	}
	return ca.PEM(), nil
}

// PEM is the CA certificate in PEM.
func (ca *CA) PEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der}))
}

// Certificate is the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Leaf returns a certificate for host signed by the CA, from the cache when
// one was issued less than a day ago.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := ca.now()
	ca.mu.Lock()
	if e, ok := ca.leaves[host]; ok {
		l := e.Value.(*leaf)
		if now.Sub(l.issued) < leafReissue {
			ca.order.MoveToFront(e)
			ca.mu.Unlock()
			return l.cert, nil
		}
		ca.order.Remove(e)
		delete(ca.leaves, host)
	}
	if ca.leafKey == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			ca.mu.Unlock()
			return nil, err
		}
		ca.leafKey = k
	}
	leafKey := ca.leafKey
	ca.mu.Unlock()

	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, leafKey.Public(), crypto.Signer(ca.key))
	if err != nil {
		return nil, fmt.Errorf("egressca: leaf for %q: %w", host, err)
	}
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: leafKey}

	ca.mu.Lock()
	defer ca.mu.Unlock()
	if e, ok := ca.leaves[host]; ok { // issued meanwhile by another caller
		return e.Value.(*leaf).cert, nil
	}
	ca.leaves[host] = ca.order.PushFront(&leaf{host: host, cert: cert, issued: now})
	for ca.order.Len() > MaxCachedLeaves {
		old := ca.order.Remove(ca.order.Back()).(*leaf)
		delete(ca.leaves, old.host)
	}
	return cert, nil
}

// CachedLeaves is how many leaves the cache holds.
func (ca *CA) CachedLeaves() int {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.order.Len()
}
