// Package cabundle writes the CA bundle an agent's tools read when the flock
// has brokered egress: the image's own system roots, if it has any, and the
// flock's egress CA, in one PEM file that SSL_CERT_FILE and its kin name
// (setting SSL_CERT_FILE replaces the default bundle in OpenSSL and Go, so
// the system roots must be in it too).
package cabundle

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// SystemBundles are where Linux distributions keep their roots (Go's own
// list): the first that exists is the image's.
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine, macOS
}

// maxBundle bounds what is read of a system bundle.
const maxBundle = 4 << 20

// Write writes to path the first of systemBundles that exists, then caPEM
// (which must be one or more PEM certificates), replacing path at once. It
// returns the system bundle it used ("" when the image has none: then only
// brokered hosts verify).
func Write(path, caPEM string, systemBundles []string) (string, error) {
	if err := checkPEM([]byte(caPEM)); err != nil {
		return "", fmt.Errorf("the flock's egress CA: %w", err)
	}
	var buf bytes.Buffer
	used := ""
	for _, p := range systemBundles {
		if p == path {
			continue // our own bundle, from an earlier start
		}
		b, err := readSmall(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("system roots %s: %w", p, err)
		}
		buf.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			buf.WriteByte('\n')
		}
		used = p
		break
	}
	buf.WriteString(caPEM)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ca-bundle-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return used, os.Rename(tmp.Name(), path)
}

func checkPEM(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("a %s block: only certificates belong in a CA bundle", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 || len(bytes.TrimSpace(b)) > 0 {
		return errors.New("must be PEM certificates and nothing else")
	}
	return nil
}

func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxBundle+1)); err != nil {
		return nil, err
	}
	if buf.Len() > maxBundle {
		return nil, fmt.Errorf("over %d MiB: not a CA bundle", maxBundle>>20)
	}
	return buf.Bytes(), nil
}
