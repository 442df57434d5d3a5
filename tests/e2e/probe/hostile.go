// The hostile agent's actions: floods, held connections, forged and hoarded
// pool tasks (TestHostile* in tests/e2e).

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// hostileConn connects with the agent's own key, as any program in its
// container can.
func hostileConn(url, seedFile string) (*nats.Conn, jetstream.JetStream) {
	self := os.Getenv("AGENT_ID")
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		fail(err)
	}
	nc, err := nats.Connect(url, opt, nats.CustomInboxPrefix("_INBOX."+self))
	if err != nil {
		fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fail(err)
	}
	return nc, js
}

// holdConns opens up to n connections to the bus as this agent, holds those
// it got for d, and prints {"opened":…,"refused":…,"error":"the first refusal"}.
func holdConns(url, seedFile string, n int, d time.Duration) {
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		fail(err)
	}
	var held []*nats.Conn
	refused, first := 0, ""
	for i := 0; i < n; i++ {
		nc, err := nats.Connect(url, opt, nats.CustomInboxPrefix("_INBOX."+os.Getenv("AGENT_ID")), nats.NoReconnect(), nats.Timeout(3*time.Second))
		if err != nil {
			refused++
			if first == "" {
				first = err.Error()
			}
			continue
		}
		held = append(held, nc)
	}
	time.Sleep(d)
	for _, nc := range held {
		nc.Close()
	}
	b, _ := json.Marshal(map[string]any{"opened": len(held), "refused": refused, "error": first})
	fmt.Println(string(b))
}

// holdTCP opens up to n connections to addr, sends nothing, and after two
// seconds counts those still open (a read times out) and those the other
// side answered or closed; it holds the open ones until d has passed and
// prints {"dialed":…,"dialFailed":…,"held":…,"closed":…}.
func holdTCP(addr string, n int, d time.Duration) {
	start := time.Now()
	var conns []net.Conn
	failed := 0
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			failed++
			continue
		}
		conns = append(conns, c)
	}
	time.Sleep(2 * time.Second)
	held, closed := 0, 0
	buf := make([]byte, 1)
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(buf); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			held++
		} else {
			closed++
		}
	}
	time.Sleep(time.Until(start.Add(d)))
	for _, c := range conns {
		c.Close()
	}
	b, _ := json.Marshal(map[string]int{"dialed": len(conns), "dialFailed": failed, "held": held, "closed": closed})
	fmt.Println(string(b))
}

func floodResults(url, seedFile string, mib int, d time.Duration) {
	nc, js := hostileConn(url, seedFile)
	defer nc.Close()
	junk := []byte(strings.Repeat("x", 512<<10))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	n := 0
	for ; n < mib*2; n++ {
		if _, err := js.Publish(ctx, "task.result."+os.Getenv("AGENT_ID"), junk); err != nil {
			fail(fmt.Errorf("after %d: %w", n, err))
		}
	}
	ok(fmt.Sprintf("stored %d results of 512 KiB", n))
}

func floodStatus(url, seedFile string, d time.Duration) {
	nc, _ := hostileConn(url, seedFile)
	defer nc.Close()
	self := os.Getenv("AGENT_ID")
	hb := []byte(`{"v":1,"agent":"` + self + `","state":"ready","seq":1,"running":0}`)
	ev := []byte(`{"v":1,"agent":"` + self + `","type":"reconnected","detail":"` + strings.Repeat("x", 200) + `"}`)
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n += 2 {
		if err := nc.Publish("agent."+self+".heartbeat", hb); err != nil {
			fail(fmt.Errorf("after %d: %w", n, err))
		}
		if err := nc.Publish("agent."+self+".events", ev); err != nil {
			fail(fmt.Errorf("after %d: %w", n, err))
		}
	}
	_ = nc.Flush()
	ok(fmt.Sprintf("published %d heartbeats and events in %s (%.0f/s)", n, d, float64(n)/d.Seconds()))
}

func floodInbox(url, seedFile, to string, d time.Duration) {
	nc, _ := hostileConn(url, seedFile)
	defer nc.Close()
	self := os.Getenv("AGENT_ID")
	replies := make(chan *nats.Msg, 1<<16)
	// One reply subject per message: an agent may answer each once.
	inbox := nc.NewRespInbox()
	if _, err := nc.ChanSubscribe(inbox+".*", replies); err != nil {
		fail(err)
	}
	body := []byte(`{"v":1,"body":"` + strings.Repeat("x", 4000) + `"}`)
	sent := 0
	for end := time.Now().Add(d); time.Now().Before(end); sent++ {
		if err := nc.PublishRequest("agent."+to+".inbox."+self, inbox+"."+strconv.Itoa(sent), body); err != nil {
			fail(fmt.Errorf("after %d: %w", sent, err))
		}
	}
	flushed := time.Now()
	if err := nc.FlushTimeout(2 * time.Minute); err != nil { // the bus reads us at its per-peer rate
		fail(err)
	}
	waited := time.Since(flushed)
	// The bus answers each: queued in agent to's mailbox (a JetStream
	// acknowledgement), or refused (its share of the mailbox is full).
	queued, refused := 0, 0
	for timeout := time.After(20 * time.Second); queued+refused < sent; {
		select {
		case m := <-replies:
			if strings.Contains(string(m.Data), `"error"`) {
				refused++
			} else {
				queued++
			}
			continue
		case <-timeout:
		}
		break
	}
	ok(fmt.Sprintf("sent %d in %s: %d queued, %d refused, %d unanswered (the bus took %s more to read them)", sent, d, queued, refused, sent-queued-refused, waited.Round(time.Millisecond)))
}

func forgePool(url, seedFile string, from uint64, n int) {
	nc, js := hostileConn(url, seedFile)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The pool's consumer is out of its reach: the bus hands pool tasks out.
	if _, err := js.Consumer(ctx, "FLOCK_TASKS", "pool"); err == nil {
		fail(errors.New("read the pool consumer's info: it should be refused"))
	}
	// Tell the test it is ready (beside this binary, in the agent's own
	// directory): on a slow machine starting takes longer than any fixed wait.
	if exe, err := os.Executable(); err == nil {
		_ = os.WriteFile(filepath.Join(filepath.Dir(exe), "forger-ready"), nil, 0o644)
	}
	sent := 0
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for seq := from; seq < from+uint64(n); seq++ {
			b, _ := json.Marshal(map[string]any{"v": 1, "agent": os.Getenv("AGENT_ID"), "status": "ok", "subject": "tasks.pool",
				"seq": seq, "nonce": "guessed", "stdout": "forged"})
			if err := nc.Publish("task.result."+os.Getenv("AGENT_ID"), b); err != nil {
				fail(err)
			}
			sent++
		}
		_ = nc.Flush()
	}
	ok(fmt.Sprintf("pool consumer refused; forged %d results for pool tasks %d to %d", sent, from, from+uint64(n)-1))
}

// hoardPool pulls its own consumer (the only one it may: the bus hands pool
// tasks out there), one task at a time, again and again, for d, never runs
// or acks what it gets and keeps each alive with +WPI. It prints
// {"given":[pool seqs],"most":the most held at once}.
func hoardPool(url, seedFile string, d time.Duration) {
	nc, js := hostileConn(url, seedFile)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cons, err := js.Consumer(ctx, "FLOCK_TASKS", os.Getenv("AGENT_ID"))
	if err != nil {
		fail(err)
	}
	if exe, err := os.Executable(); err == nil {
		_ = os.WriteFile(filepath.Join(filepath.Dir(exe), "hoarder-ready"), nil, 0o644)
	}
	held := map[string]jetstream.Msg{}
	given := []string{}
	most := 0
	for ctx.Err() == nil {
		if batch, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond)); err == nil {
			for m := range batch.Messages() {
				if seq := m.Headers().Get("Flock-Pool-Seq"); seq != "" {
					held[seq] = m
					given = append(given, seq)
					most = max(most, len(held))
				}
			}
		}
		for _, m := range held {
			_ = m.InProgress()
		}
	}
	b, _ := json.Marshal(map[string]any{"given": given, "most": most})
	fmt.Println(string(b))
	os.Exit(0)
}

// replyRedirect gives each target as the reply subject of a malformed pull
// of this agent's own mailbox, on a connection of its own with its own key:
// JetStream answers a pull on its reply subject past every permission, so
// a target that is an API call or a stream's subject would be acted on or
// written. It prints {"target":…,"closed":…,"error":…} for each and exits
// 1 when the bus refused every one (closed the connection), 0 when any
// connection stayed open after it.
func replyRedirect(url, seedFile string, targets []string) {
	self := os.Getenv("AGENT_ID")
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		fail(err)
	}
	pull := "$JS.API.CONSUMER.MSG.NEXT." + protocol.MailStream(self) + "." + protocol.MailConsumer
	refused := 0
	for _, target := range targets {
		closed := make(chan struct{})
		nc, err := nats.Connect(url, opt, nats.CustomInboxPrefix(protocol.InboxPrefix(self)), nats.NoReconnect(),
			nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
		if err != nil {
			fail(err)
		}
		_ = nc.PublishRequest(pull, target, []byte(`{"batch":"bad"}`))
		_ = nc.Flush()
		got := map[string]any{"target": target, "closed": false}
		select {
		case <-closed:
			refused++
			got["closed"] = true
			if err := nc.LastError(); err != nil {
				got["error"] = err.Error()
			}
		case <-time.After(3 * time.Second):
			nc.Close()
		}
		b, _ := json.Marshal(got)
		fmt.Println(string(b))
	}
	if refused == len(targets) {
		os.Exit(1)
	}
}

// floodAudit publishes, as fast as the bus reads it, results whose task ID
// is 11,000 '<' (which JSON writes as six bytes each: an entry keeping it
// would be over the audit trail's 64 KiB message) on its own result
// subject, and every tenth time a message to agent to's inbox with such an
// ID, for d. It prints how many of each it published.
func floodAudit(url, seedFile, to string, d time.Duration) {
	nc, _ := hostileConn(url, seedFile)
	defer nc.Close()
	self := os.Getenv("AGENT_ID")
	id := strings.Repeat("<", 11000)
	result := []byte(`{"v":1,"task_id":"` + id + `","agent":"` + self + `","status":"ok"}`)
	message := []byte(`{"v":1,"id":"` + id + `","from":"` + self + `","body":"x"}`)
	results, messages := 0, 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := nc.Publish(protocol.ResultSubject(self), result); err != nil {
			fail(fmt.Errorf("after %d results: %w", results, err))
		}
		results++
		if results%10 == 0 {
			if err := nc.Publish(protocol.InboxSubject(to, self), message); err != nil {
				fail(fmt.Errorf("after %d messages: %w", messages, err))
			}
			messages++
		}
	}
	if err := nc.FlushTimeout(2 * time.Minute); err != nil { // the bus reads us at its per-peer rate
		fail(err)
	}
	ok(fmt.Sprintf("published %d results and %d messages in %s", results, messages, d))
}
