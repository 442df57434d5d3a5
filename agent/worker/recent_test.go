package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// The memory a logs request reads stays bounded: the last lines only, each
// cut, and an answer within its byte bound, newest lines kept.
func TestRecentLogIsBounded(t *testing.T) {
	r := worker.NewRecentLog()
	if lines, _ := r.Last(0); len(lines) != 0 {
		t.Fatalf("empty: %q", lines)
	}
	for i := range protocol.LogsKeepLines + 50 {
		fmt.Fprintf(r, "line %d\n", i)
	}
	lines, trunc := r.Last(0)
	if len(lines) != protocol.LogsKeepLines || trunc || lines[0] != "line 50" || lines[len(lines)-1] != fmt.Sprintf("line %d", protocol.LogsKeepLines+49) {
		t.Fatalf("kept %d lines from %q to %q", len(lines), lines[0], lines[len(lines)-1])
	}
	if lines, _ := r.Last(3); strings.Join(lines, ",") != "line 247,line 248,line 249" {
		t.Fatalf("last 3: %q", lines)
	}
	// A line written in pieces is one line; a long one is cut.
	r.Write([]byte("half "))
	r.Write([]byte("and half\n" + strings.Repeat("x", 10*protocol.LogsMaxLineBytes) + "\n"))
	lines, _ = r.Last(2)
	if lines[0] != "half and half" || len(lines[1]) != protocol.LogsMaxLineBytes {
		t.Fatalf("pieces %q, long line %d bytes", lines[0], len(lines[1]))
	}
	// Long lines everywhere: the answer keeps within its byte bound.
	for range protocol.LogsKeepLines {
		r.Write([]byte(strings.Repeat("y", 5000) + "\n"))
	}
	lines, trunc = r.Last(0)
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	if !trunc || size > protocol.LogsMaxBytes || len(lines) < protocol.LogsMaxBytes/protocol.LogsMaxLineBytes-1 {
		t.Fatalf("%d lines, %d bytes, truncated %v", len(lines), size, trunc)
	}
}
