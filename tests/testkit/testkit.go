// Package testkit holds the helpers the project's tests share.
package testkit

import (
	"net"
	"os"
	"testing"
)

// SkipInShort skips a slow test under `go test -short` (`make test`, the fast
// loop). `make check`, which CI runs, never passes -short: nothing skips there.
func SkipInShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why + " (skipped by -short)")
	}
}

// LocalIPv4 is an IPv4 address of this machine other than loopback: a peer
// the bus and the gateway count (they do not count loopback).
func LocalIPv4(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no address but loopback")
	return ""
}

// ReadFile is the file at p as a string; a file that cannot be read fails t.
func ReadFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
