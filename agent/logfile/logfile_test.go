package logfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBoundedInPlace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.log")
	l, err := Open(p, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	for i := range 2000 {
		fmt.Fprintf(l, "{\"line\":%d}\n", i)
	}
	l.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 8<<10 {
		t.Fatalf("log is %d bytes, over its 8 KiB limit", len(b))
	}
	if !bytes.HasSuffix(b, []byte("{\"line\":1999}\n")) {
		t.Fatalf("newest line lost; tail: %q", b[max(0, len(b)-40):])
	}
	if !strings.Contains(string(b), "truncated in place") {
		t.Fatal("no truncation marker")
	}
	after, _ := os.Stat(p)
	if !os.SameFile(before, after) {
		t.Fatal("file was replaced, not truncated in place (a bind mount would lose it)")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
			t.Fatalf("torn line %q", line)
		}
	}
}
