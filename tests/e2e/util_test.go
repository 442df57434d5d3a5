package e2e

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// tryPublish sends a task through JetStream (deduplicated by its ID).
func tryPublish(js jetstream.JetStream, subject string, task protocol.Task) error {
	task.V = protocol.Version
	b, _ := json.Marshal(task)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := js.Publish(ctx, subject, b, jetstream.WithMsgID(task.ID))
	return err
}

// testContext is a context that ends after d, or when the test does.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// readFile is a file the test needs: it fails without it.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
