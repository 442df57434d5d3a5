package e2e

import (
	"context"
	"encoding/json"
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
