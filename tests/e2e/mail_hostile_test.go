package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// agent-1, from its container with its own key, attacks the operator's mail
// to agent-2 both ways found: it sends a message carrying the ID the
// operator's next message will carry (the mailbox drops a repeated ID for
// two minutes: the operator's was answered "queued" and never delivered),
// then floods agent-2 with small messages for 70 s (agent-2 kept the newest
// 1,000 inbox files whoever sent them, and pruned the operator's before
// agent-2 read it). The bus refuses the squat, closing agent-1's
// connection and naming the rule; the operator's message is delivered; the
// flood is held to agent-1's share and refused past it; while four more
// agents fill agent-2's mailbox with their largest messages (each within its
// share, together past the mailbox's bytes), the operator's message is
// delivered (its share of the mailbox is its own); the operator's message
// is still in agent-2's inbox after the flood, and agent-2 takes it.
func TestHostileMail(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	f, a1, a2 := needTwo(t)
	cl := operatorClient(t)
	tag := fmt.Sprint(time.Now().UnixNano())
	squatted := "m-squat-" + tag
	out := probe(t, a1, "mail-squat", "nats://bus:4222", protocol.ContainerCredsFile, a2, squatted)
	t.Logf("agent-1's squat: %s", strings.TrimSpace(out.Stdout))
	if out.ExitCode == 0 || !strings.Contains(out.Stdout, `does not start with \"agent-1:\"`) {
		t.Errorf("agent-1's message with the operator's ID: %q %q; want refused by the bus, naming the rule", out.Stdout, out.Stderr)
	}
	send := func(id, body string) protocol.Receipt {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		r, err := cl.Send(ctx, a2, protocol.Message{ID: id, Body: body}, 5*time.Second)
		if err != nil || r.Status != protocol.ReceiptDelivered || r.File == "" {
			t.Errorf("the operator's message %s to agent-2: %+v %v; want delivered", id, r, err)
		}
		return r
	}
	send(squatted, "the operator's, its ID squatted")

	keep := send("m-keep-"+tag, "the operator's, to outlast the flood")
	// Afterwards agent-2 takes what agent-1 left, for the tests after this one.
	t.Cleanup(func() { takeMailFrom(t, f, a2, a1) })
	const floodFor = 70 * time.Second
	done := probeAsync(a1, floodFor+time.Minute, "mail-flood", "nats://bus:4222", protocol.ContainerCredsFile, a2, floodFor.String())
	// Meanwhile four more agents send agent-2 their largest messages for
	// 20 s: each within its own share, together more than its mailbox's
	// bytes, so the mailbox is full; the operator's mail has a share of its
	// own and is still delivered.
	const bigFor = 20 * time.Second
	var big []string
	var bigDone []<-chan replayExec
	for _, s := range f.agents[min(6, len(f.agents)):] { // agent-7 on: no later test reads their trail shares
		if f.probe[s] != "" && len(big) < 4 {
			big = append(big, s)
		}
	}
	if len(big) < 4 {
		t.Logf("%d agents with the probe beside agent-1 and agent-2 (a deployed flock): the mailbox is not filled", len(big))
		big = nil
	}
	for _, s := range big {
		t.Cleanup(func() { takeMailFrom(t, f, a2, s) })
		bigDone = append(bigDone, probeAsync(s, bigFor+time.Minute, "mail-flood", "nats://bus:4222", protocol.ContainerCredsFile, a2, bigFor.String(), "32000"))
	}
	time.Sleep(bigFor / 2)
	during := send("m-during-"+tag, "the operator's, while the agents fill the mailbox")
	mailboxFull := false
	for i, d := range bigDone {
		r := <-d
		if err := r.ended(); err != nil {
			t.Fatalf("%s's flood: %v: %s", big[i], err, r.all())
		}
		var bf struct {
			Stored, Refused int
			Error           string
		}
		if err := json.Unmarshal([]byte(lastLine(r.out)), &bf); err != nil {
			t.Fatalf("%q: %v", r.out, err)
		}
		t.Logf("%s's flood of large messages: %d stored, %d refused (%s)", big[i], bf.Stored, bf.Refused, bf.Error)
		mailboxFull = mailboxFull || strings.Contains(bf.Error, "maximum bytes")
	}
	if len(big) > 0 && !mailboxFull {
		t.Errorf("four agents' large messages never filled agent-2's mailbox: the test no longer shows the operator's share")
	}
	if during.File != "" {
		if _, err := os.Stat(filepath.Join(f.sharedRoot, "agents", a2, during.File)); err != nil {
			t.Errorf("the operator's message during the flood: %v", err)
		}
	}
	res := <-done
	if err := res.ended(); err != nil {
		t.Fatalf("the flood probe: %v: %s", err, res.all())
	}
	var flood struct {
		Stored, Refused int
		Error           string
	}
	if err := json.Unmarshal([]byte(lastLine(res.out)), &flood); err != nil {
		t.Fatalf("%q: %v", res.out, err)
	}
	t.Logf("agent-1's flood: %d stored, %d refused (%s)", flood.Stored, flood.Refused, flood.Error)
	if flood.Refused == 0 || !strings.Contains(flood.Error, "per subject") && !strings.Contains(flood.Error, "maximum messages") {
		t.Errorf("agent-1's flood was never refused past its share: %+v", flood)
	}
	if limit := protocol.InboxPerSender + protocol.MailPerSender; flood.Stored > limit {
		t.Errorf("the bus stored %d of agent-1's messages that agent-2 never took: over agent-1's shares (%d)", flood.Stored, limit)
	}
	if keep.File == "" {
		return
	}
	dir := filepath.Join(f.sharedRoot, "agents", a2)
	if _, err := os.Stat(filepath.Join(dir, keep.File)); err != nil {
		t.Fatalf("the operator's message after agent-1's flood, before agent-2 took it: %v", err)
	}
	// agent-2's work takes it, in its container.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack, err := f.engine.Exec(ctx, container(a2), []string{"/flock-agent", "inbox", "ack", "m-keep-" + tag}, "AGENT_ID="+a2)
	if err != nil || ack.ExitCode != 0 {
		t.Fatalf("agent-2 takes the operator's message: %+v %v", ack, err)
	}
	taken := filepath.Join("inbox", worker.TakenDir, filepath.Base(keep.File))
	if !strings.Contains(ack.Stdout, taken) {
		t.Errorf("inbox ack said %q, want %s", ack.Stdout, taken)
	}
	var st worker.Stored
	b, err := os.ReadFile(filepath.Join(dir, taken))
	if err != nil || json.Unmarshal(b, &st) != nil || st.From != protocol.OperatorUser || st.Message.Body != "the operator's, to outlast the flood" {
		t.Fatalf("the taken message: %s %v", b, err)
	}
}

// takeMailFrom has agent to take, in its container, every message from
// sender in its inbox, until none is left nor comes for two seconds (the
// mailbox hands over what waited there as the inbox makes room): a flood
// leaves the next test an inbox with room for the sender.
func takeMailFrom(t *testing.T, f *flockUnderTest, to, from string) {
	t.Helper()
	inbox := filepath.Join(f.sharedRoot, "agents", to, "inbox")
	quiet := time.Time{}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		var names []string
		entries, _ := os.ReadDir(inbox)
		for _, e := range entries {
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			var st struct {
				From string `json:"from"`
			}
			if b, err := os.ReadFile(filepath.Join(inbox, e.Name())); err == nil && json.Unmarshal(b, &st) == nil && st.From == from {
				names = append(names, e.Name())
			}
		}
		if len(names) == 0 {
			if quiet.IsZero() {
				quiet = time.Now()
			} else if time.Since(quiet) > 2*time.Second {
				return
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		quiet = time.Time{}
		for len(names) > 0 {
			n := min(len(names), 100)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := f.engine.Exec(ctx, container(to), append([]string{"/flock-agent", "inbox", "ack"}, names[:n]...), "AGENT_ID="+to)
			cancel()
			if err != nil {
				t.Logf("%s takes %s's mail: %v", to, from, err)
			}
			names = names[n:]
		}
	}
	t.Errorf("%s's inbox still receives mail from %s after 2 minutes of taking it", to, from)
}
