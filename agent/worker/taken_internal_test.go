package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
)

// writeStored stores a message of sender in dir as the runtime names it.
func writeStored(t *testing.T, dir string, n int, sender, id string) string {
	t.Helper()
	st := stored("inbox", protocol.InboxSubject("agent-2", sender), sender, []byte(`{"v":1,"id":"`+id+`","body":"x"}`))
	name := fmt.Sprintf("20261126T000000.000000000Z-%06d-inbox-%s.json", n, id)
	b, _ := protocol.Encode(st, true)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// Pruning removes taken messages only, however many untaken ones there are
// and whoever sent them: agent-1's flood of untaken files never pushes out
// the operator's message.
func TestPruneNeverRemovesAnUntakenMessage(t *testing.T) {
	inbox := filepath.Join(t.TempDir(), "inbox")
	taken := filepath.Join(inbox, TakenDir)
	if err := os.MkdirAll(taken, 0o700); err != nil {
		t.Fatal(err)
	}
	a := &Agent{inboxDir: inbox, cfg: Config{InboxKeep: 3}, log: slog.New(slog.DiscardHandler), pruneReq: make(chan string, 1)}
	a.untaken = newUntaken(inbox)
	ops := writeStored(t, inbox, 0, protocol.OperatorUser, "from-the-operator")
	for i := 1; i <= 20; i++ {
		writeStored(t, inbox, i, "agent-1", fmt.Sprintf("flood-%d", i))
	}
	for i := 1; i <= 6; i++ {
		if _, err := TakeMessage(inbox, fmt.Sprintf("flood-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	a.prune(taken, a.cfg.InboxKeep, false) // what pruneLoop does on "inbox"
	if _, err := os.Stat(filepath.Join(inbox, ops)); err != nil {
		t.Fatalf("the operator's untaken message was pruned: %v", err)
	}
	left, _ := os.ReadDir(inbox)
	kept, _ := os.ReadDir(taken)
	if len(left) != 1+14+1 || len(kept) != 3 { // the untaken files and taken/; the newest taken
		t.Fatalf("after pruning: %d entries in the inbox, %d taken; want 16 and 3", len(left), len(kept))
	}
	if n := a.untaken.count("agent-1"); n != 14 {
		t.Fatalf("agent-1's untaken: %d, want 14", n)
	}
	if n := a.untaken.count(protocol.OperatorUser); n != 1 {
		t.Fatalf("the operator's untaken: %d, want 1", n)
	}
	// The work deletes one itself: counted no more.
	if err := os.Remove(filepath.Join(inbox, ops)); err != nil {
		t.Fatal(err)
	}
	if n := a.untaken.count(protocol.OperatorUser); n != 0 {
		t.Fatalf("the operator's untaken after its file went: %d", n)
	}
}

// A message is taken by its ID or its file; the answer names where it went
// or why not, by field.
func TestTakeMessage(t *testing.T) {
	inbox := filepath.Join(t.TempDir(), "inbox")
	if err := os.MkdirAll(inbox, 0o700); err != nil {
		t.Fatal(err)
	}
	one := writeStored(t, inbox, 1, "agent-1", "m-1")
	a := writeStored(t, inbox, 2, "agent-1", "same")
	writeStored(t, inbox, 3, protocol.OperatorUser, "same")
	if got, err := TakeMessage(inbox, "m-1"); err != nil || got != filepath.Join("inbox", TakenDir, one) {
		t.Fatalf("by ID: %q %v", got, err)
	}
	if got, err := TakeMessage(inbox, "m-1"); err != nil || got != filepath.Join("inbox", TakenDir, one) {
		t.Fatalf("taken again: %q %v; want its file", got, err)
	}
	if _, err := TakeMessage(inbox, "same"); err == nil || !strings.Contains(err.Error(), "2 untaken messages have the ID same") || !strings.Contains(err.Error(), a) {
		t.Fatalf("an ID two senders used: %v; want the files named", err)
	}
	if got, err := TakeMessage(inbox, "inbox/"+a); err != nil || got != filepath.Join("inbox", TakenDir, a) {
		t.Fatalf("by file: %q %v", got, err)
	}
	for ref, want := range map[string]string{
		"":                "id: required",
		"../../etc/x":     "without a path",
		"no-such":         "no untaken message no-such",
		"nope.json":       "no untaken message file nope.json",
		"bad id!":         "not a message ID",
		"inbox/taken/../": "without a path",
	} {
		_, err := TakeMessage(inbox, ref)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", ref, err, want)
		}
		if strings.HasPrefix(ref, "no") && !errors.Is(err, ErrNotInInbox) {
			t.Errorf("%q: %v is not ErrNotInInbox", ref, err)
		}
	}
}
