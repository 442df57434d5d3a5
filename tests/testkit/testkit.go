// Package testkit holds the helpers the project's tests share.
package testkit

import "testing"

// SkipInShort skips a slow test under `go test -short` (`make test`, the fast
// loop). `make check`, which CI runs, never passes -short: nothing skips there.
func SkipInShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why + " (skipped by -short)")
	}
}
