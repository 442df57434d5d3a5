// The hostile agent's attacks on another sender's mail (TestHostileMail in
// tests/e2e): squatting the operator's next message ID, and a flood meant to
// push the operator's message out of the receiver's inbox.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// mailSquat publishes one message to agent to's inbox carrying the
// de-duplication ID the operator's message id will carry
// (protocol.MailMsgID("operator", id)), and prints
// {"stored":…,"closed":…,"error":…}: stored when the mailbox took it.
func mailSquat(url, seedFile, to, id string) {
	self := os.Getenv("AGENT_ID")
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		fail(err)
	}
	closed := make(chan struct{})
	nc, err := nats.Connect(url, opt, nats.CustomInboxPrefix(protocol.InboxPrefix(self)), nats.NoReconnect(),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fail(err)
	}
	m := nats.NewMsg(protocol.InboxSubject(to, self))
	m.Data = []byte(`{"v":1,"id":"` + id + `","body":"squatted"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := map[string]any{"stored": false, "closed": false}
	if ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(protocol.MailMsgID(protocol.OperatorUser, id))); err == nil {
		got["stored"], got["seq"] = true, ack.Sequence
	}
	select {
	case <-closed:
		got["closed"] = true
	case <-time.After(3 * time.Second):
	}
	if err := nc.LastError(); err != nil {
		got["error"] = err.Error()
	}
	nc.Close()
	b, _ := json.Marshal(got)
	fmt.Println(string(b))
	if got["stored"] == true {
		os.Exit(0)
	}
	os.Exit(1)
}

// mailFlood sends agent to messages whose bodies are size bytes as fast as the bus takes them for
// d, each a JetStream publish of its own (its own IDs), waiting 20 ms after a
// refusal, and prints {"stored":…,"refused":…,"error":"the last refusal"}.
func mailFlood(url, seedFile, to string, d time.Duration, size int) {
	nc, js := hostileConn(url, seedFile)
	defer nc.Close()
	self := os.Getenv("AGENT_ID")
	stored, refused, last := 0, 0, ""
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		id := "flood-" + strconv.Itoa(i)
		m := nats.NewMsg(protocol.InboxSubject(to, self))
		m.Data = []byte(`{"v":1,"id":"` + id + `","body":"` + strings.Repeat("x", size) + `"}`)
		_, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(protocol.MailMsgID(self, id)))
		cancel()
		if err != nil {
			refused++
			last = err.Error()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		stored++
	}
	b, _ := json.Marshal(map[string]any{"stored": stored, "refused": refused, "error": last})
	fmt.Println(string(b))
}
