package worker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
)

// A message delivered again (the agent stored it, then stopped before its
// ack reached the mailbox) is found in the inbox, not stored twice; the
// same ID from another sender is another message.
func TestMailDeliveredAgainIsFoundNotDoubled(t *testing.T) {
	a := &Agent{inboxDir: filepath.Join(t.TempDir(), "inbox")}
	if err := os.MkdirAll(a.inboxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	first := stored("inbox", protocol.InboxSubject("agent-1", "agent-2"), "agent-2", []byte(`{"v":1,"id":"m-1","body":"hi"}`))
	name := "20261126T000000.000000000Z-000001-inbox-m-1.json"
	b, _ := protocol.Encode(first, true)
	if err := os.WriteFile(filepath.Join(a.inboxDir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
	again := stored("inbox", protocol.InboxSubject("agent-1", "agent-2"), "agent-2", []byte(`{"v":1,"id":"m-1","body":"hi"}`))
	if got := a.storedBefore(again); got != filepath.Join("inbox", name) {
		t.Fatalf("the same sender's message again: found %q, want %q", got, name)
	}
	other := stored("inbox", protocol.InboxSubject("agent-1", "agent-3"), "agent-3", []byte(`{"v":1,"id":"m-1","body":"hi"}`))
	if got := a.storedBefore(other); got != "" {
		t.Fatalf("another sender's message with the same ID taken for a copy: %q", got)
	}
}
