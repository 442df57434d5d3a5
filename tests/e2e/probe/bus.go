// The bus probe: what an agent's own credentials may and may not do on the bus.

package main

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// natsProbe connects with an agent's own credentials and tries what the bus
// contract forbids it (acting as, or listening to, another agent) and one
// thing it allows, as a control. It prints a JSON map of outcome per attempt.
func natsProbe(url, seedFile, other string) {
	errs := make(chan error, 64)
	self := os.Getenv("AGENT_ID")
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		fail(err)
	}
	nc, err := nats.Connect(url, opt, nats.CustomInboxPrefix("_INBOX."+self),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		fail(err)
	}
	defer nc.Close()
	outcome := map[string]string{}
	try := func(name string, f func() error) {
		err := f()
		if errors.Is(err, nats.ErrTimeout) {
			// A denied request times out; the bus's reason arrives on
			// its own, and belongs to this attempt, not the next.
			select {
			case err = <-errs:
			case <-time.After(500 * time.Millisecond):
			}
		}
		if err == nil {
			err = nc.Flush()
		}
		if err == nil {
			select {
			case err = <-errs:
			case <-time.After(500 * time.Millisecond):
			}
		}
		if err != nil {
			outcome[name] = "denied: " + err.Error()
		} else {
			outcome[name] = "allowed"
		}
	}
	try("publish own heartbeat", func() error { return nc.Publish("agent."+self+".heartbeat", []byte(`{}`)) })
	try("publish as other heartbeat", func() error { return nc.Publish("agent."+other+".heartbeat", []byte(`{}`)) })
	try("publish as other result", func() error { return nc.Publish("task.result."+other, []byte(`{}`)) })
	try("publish broadcast", func() error { return nc.Publish("broadcast", []byte(`{}`)) })
	// Usage is the gateway's word: no agent may publish it, not even its own.
	try("publish own usage", func() error { return nc.Publish("agent."+self+".usage", []byte(`{"v":1,"total":0}`)) })
	try("publish other usage", func() error { return nc.Publish("agent."+other+".usage", []byte(`{"v":1,"total":999999}`)) })
	try("subscribe other agent", func() error { _, err := nc.SubscribeSync("agent." + other + ".>"); return err })
	try("subscribe other inbox", func() error { _, err := nc.SubscribeSync("agent." + other + ".inbox.*"); return err })
	try("send as other", func() error { return nc.Publish("agent."+other+".inbox."+other, []byte(`{"v":1,"body":"forged"}`)) })
	try("send as operator", func() error { return nc.Publish("agent."+other+".inbox.operator", []byte(`{"v":1,"body":"forged"}`)) })
	try("send into the operator's share", func() error {
		return nc.Publish(protocol.OperatorInboxSubject(other), []byte(`{"v":1,"body":"forged"}`))
	})
	try("subscribe other replies", func() error { _, err := nc.SubscribeSync("_INBOX." + other + ".>"); return err })
	try("subscribe all results", func() error { _, err := nc.SubscribeSync("task.result.>"); return err })
	try("read other tasks", func() error {
		_, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.FLOCK_TASKS."+other, []byte(`{"batch":1,"no_wait":true}`), time.Second)
		return err
	})
	// +NXT on the other's consumer through a subject that both ack layouts'
	// patterns could match (classic for the other's consumer, v2 for its own).
	try("pull other tasks through an ack subject", func() error {
		m := nats.NewMsg("$JS.ACK.FLOCK_TASKS." + other + ".FLOCK_TASKS." + self + ".1.1.1")
		m.Reply, m.Data = nc.NewRespInbox(), []byte("+NXT")
		return nc.PublishMsg(m)
	})
	// Its mail comes from its mailbox (the runtime pulls it), never from the
	// inbox subject itself; and another agent's mailbox is out of reach.
	try("subscribe own inbox subject", func() error { _, err := nc.SubscribeSync("agent." + self + ".inbox.*"); return err })
	try("take other mail", func() error {
		_, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.FLOCK_MAIL_"+other+".inbox", []byte(`{"batch":1,"no_wait":true}`), time.Second)
		return err
	})
	try("read other mailbox", func() error {
		_, err := nc.Request("$JS.API.DIRECT.GET.FLOCK_MAIL_"+other, []byte(`{"seq":1}`), time.Second)
		return err
	})
	// The audit trail: no agent writes an entry, reads the trail or its
	// anchors, or cuts it.
	try("write an audit entry", func() error {
		return nc.Publish("audit.entry", []byte(`{"seq":1,"who":"operator","kind":"task.sent"}`))
	})
	try("read the audit trail", func() error {
		_, err := nc.Request("$JS.API.DIRECT.GET.FLOCK_AUDIT", []byte(`{"seq":1}`), time.Second)
		return err
	})
	try("purge the audit trail", func() error {
		_, err := nc.Request("$JS.API.STREAM.PURGE.FLOCK_AUDIT", nil, time.Second)
		return err
	})
	try("move the audit anchor", func() error {
		return nc.Publish("$KV.FLOCK_AUDIT_ANCHORS.head", []byte(`{"seq":1,"hash":"00"}`))
	})
	// A receipt subject that is not a reply inbox (a colluding peer names
	// one in Flock-Receipt): answering would publish there in its name. An
	// agent publishes into reply inboxes only, whatever it was sent.
	for _, reply := range []string{"tasks." + other, "agent." + other + ".heartbeat", "$JS.API.STREAM.PURGE.FLOCK_TASKS", "$SYS.REQ.SERVER.PING"} {
		try("answer a message on "+reply, func() error { return nc.Publish(reply, []byte(`{"v":1,"id":"forged"}`)) })
	}
	json.NewEncoder(os.Stdout).Encode(outcome)
}
