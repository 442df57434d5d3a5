// The board probe: what an agent's own key may and may not do with the
// board (TestHostileBoard in tests/e2e), and a plain claim (the victim's
// side of it).

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// boardConn connects as this agent, its permission violations sent to errs.
func boardConn(url, seedFile string, errs chan error) (*board.Client, *nats.Conn) {
	self := os.Getenv("AGENT_ID")
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		fail(err)
	}
	nc, err := nats.Connect(url, opt, nats.CustomInboxPrefix(protocol.InboxPrefix(self)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err != nil {
		fail(err)
	}
	return board.NewAgentClient(nc, self), nc
}

// boardClaim claims plan/task as this agent and prints the reply (the task
// and its context): the holder's side of TestHostileBoard (another agent
// holds a task), the dependent's of TestHostileBoardSquat.
func boardClaim(url, seedFile, plan, task string) {
	cl, nc := boardConn(url, seedFile, make(chan error, 8))
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := cl.Claim(ctx, plan, task, "")
	if err != nil {
		fail(err)
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
}

// boardGet gets artifact name of plan/task as this agent and prints it (as
// JSON: the artifact, and its bytes as text).
func boardGet(url, seedFile, plan, task, name string) {
	cl, nc := boardConn(url, seedFile, make(chan error, 8))
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, a, err := cl.Get(ctx, plan, task, name)
	if err != nil {
		fail(err)
	}
	b, _ := json.Marshal(map[string]any{"artifact": a, "text": string(data)})
	fmt.Println(string(b))
}

// boardCode is what a board request came to: "ok", the refusal's code, or
// "error: …" for no answer.
func boardCode(err error) string {
	var be *protocol.BoardError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &be):
		return be.Code
	}
	return "error: " + err.Error()
}

// boardHostile is a hostile agent at the board. The operator gave plan
// other a task labelled for another agent ("secret") and one the victim
// holds ("held"), and plan mine two prompt tasks assigned to this agent
// ("m1", "m2"). It tries, with its own key, what the board and the bus
// must refuse, and prints a JSON map of outcome per attempt: a board
// code ("ok", "forbidden", …), or for what the bus must refuse "denied"
// (a permissions violation and no answer), "answered" or "no violation".
func boardHostile(url, seedFile, victim, other, mine string) {
	self := os.Getenv("AGENT_ID")
	errs := make(chan error, 64)
	cl, nc := boardConn(url, seedFile, errs)
	defer nc.Close()
	out := map[string]string{}
	ask := func(name string, f func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out[name] = boardCode(f(ctx))
	}
	claim := func(plan, task string) func(context.Context) error {
		return func(ctx context.Context) error { _, err := cl.Claim(ctx, plan, task, ""); return err }
	}
	// Control: its own plan, which it may see.
	ask("show own task", func(ctx context.Context) error { _, err := cl.Show(ctx, mine, "m1"); return err })
	// Nothing of plan other is for it: the labelled task is not, the
	// victim holds the other.
	ask("claim in other plan", claim(other, ""))
	ask("claim labelled task", claim(other, "secret"))
	ask("claim held task", claim(other, "held"))
	ask("renew held task", func(ctx context.Context) error { _, err := cl.Renew(ctx, other, "held"); return err })
	ask("complete held task", func(ctx context.Context) error {
		_, err := cl.Complete(ctx, other, "held", protocol.BoardResult{Summary: "forged"})
		return err
	})
	ask("fail held task", func(ctx context.Context) error { _, err := cl.Fail(ctx, other, "held", "forged", nil); return err })
	ask("release held task", func(ctx context.Context) error { _, err := cl.Release(ctx, other, "held", "forged"); return err })
	ask("show labelled task", func(ctx context.Context) error { _, err := cl.Show(ctx, other, "secret"); return err })
	ask("show held task", func(ctx context.Context) error { _, err := cl.Show(ctx, other, "held"); return err })
	{
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ts, err := cl.List(ctx, other)
		cancel()
		if err != nil {
			out["list other plan"] = boardCode(err)
		} else {
			var ids []string
			for _, t := range ts {
				ids = append(ids, t.ID)
			}
			out["list other plan"] = fmt.Sprintf("%d tasks %v", len(ts), ids)
		}
	}
	// Its claim limit (1 in the e2e flock): one task, not two.
	ask("claim own task", claim(mine, "m1"))
	ask("claim a second task", claim(mine, "m2"))
	ask("claim any task past the limit", claim("", ""))
	// A command for another agent comes from the operator alone.
	run := []string{"/flock-agent", "tool", "echo", "pwned"}
	ask("add run task for victim", func(ctx context.Context) error {
		_, err := cl.Add(ctx, mine, "m1", protocol.BoardTaskSpec{ID: "evil-run", Run: run, Assignee: victim})
		return err
	})
	ask("add run task for anyone", func(ctx context.Context) error {
		_, err := cl.Add(ctx, mine, "m1", protocol.BoardTaskSpec{ID: "evil-any", Run: run})
		return err
	})
	ask("add under held task", func(ctx context.Context) error {
		_, err := cl.Add(ctx, other, "held", protocol.BoardTaskSpec{ID: "evil-under", Prompt: "x", Assignee: self})
		return err
	})
	// Adds past its quota: what it added before counts.
	before := 0
	{
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ts, err := cl.List(ctx, "")
		cancel()
		if err != nil {
			fail(fmt.Errorf("list: %w", err))
		}
		for _, t := range ts {
			if t.CreatedBy == self {
				before++
			}
		}
	}
	added, refusals := 0, []string{}
	for i := 0; i < 200 && len(refusals) < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cl.Add(ctx, mine, "m1", protocol.BoardTaskSpec{ID: "flood-" + strconv.Itoa(i), Prompt: "flood", Assignee: self})
		cancel()
		if err == nil {
			added++
			if len(refusals) > 0 {
				refusals = append(refusals, "ok after a refusal")
			}
			continue
		}
		refusals = append(refusals, boardCode(err))
	}
	// Artifacts: none under a task it does not hold, none of a task its
	// held task does not need (the victim put one under "held"), and no
	// more than its quota under one it holds.
	ask("put under held task", func(ctx context.Context) error {
		_, err := cl.Put(ctx, other, "held", "evil.txt", []byte("forged"))
		return err
	})
	ask("get victim's artifact", func(ctx context.Context) error {
		_, _, err := cl.Get(ctx, other, "held", "victim.txt")
		return err
	})
	ask("put own artifact", func(ctx context.Context) error {
		_, err := cl.Put(ctx, mine, "m1", "notes.txt", []byte("mine"))
		return err
	})
	{
		// Its share in data, then empty artifacts (each costs the store
		// its record) until it is refused.
		flood := func(data []byte, most int, prefix string) string {
			put, code := 0, "ok"
			for i := 0; i < most && code == "ok"; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := cl.Put(ctx, mine, "m1", prefix+strconv.Itoa(i), data)
				cancel()
				if code = boardCode(err); code == "ok" {
					put++
				}
			}
			return fmt.Sprintf("%d put, then %s", put, code)
		}
		out["artifact flood"] = flood(make([]byte, protocol.ArtifactBytes), protocol.ArtifactQuotaBytes/protocol.ArtifactBytes+2, "fill-")
		out["empty artifact flood"] = flood(nil, 2000, "empty-")
	}
	out["flood added before"] = strconv.Itoa(before)
	out["flood added"] = strconv.Itoa(added)
	out["flood refused"] = strings.Join(refusals, " ")

	// What the bus itself refuses it: another agent's request subjects,
	// the bucket, the board's stream, the events, the service's subjects.
	drain := func() {
		for {
			select {
			case <-errs:
			default:
				return
			}
		}
	}
	bus := func(name string, f func() (answered bool, err error)) {
		drain()
		answered, err := f()
		if err == nil {
			err = nc.Flush()
		}
		var violation error
		select {
		case violation = <-errs:
		case <-time.After(time.Second):
		}
		switch {
		case answered:
			out[name] = "answered"
		case violation != nil && strings.Contains(strings.ToLower(violation.Error()), "permissions violation"):
			out[name] = "denied"
		case violation != nil:
			out[name] = "error: " + violation.Error()
		default:
			out[name] = fmt.Sprintf("no violation (%v)", err)
		}
	}
	request := func(subject string, body []byte) func() (bool, error) {
		return func() (bool, error) {
			_, err := nc.Request(subject, body, 2*time.Second)
			return err == nil, nil
		}
	}
	publish := func(subject string, body []byte) func() (bool, error) {
		return func() (bool, error) { return false, nc.Publish(subject, body) }
	}
	subscribe := func(subject string) func() (bool, error) {
		return func() (bool, error) {
			sub, err := nc.SubscribeSync(subject)
			if err != nil {
				return false, err
			}
			_ = nc.Flush()
			m, err := sub.NextMsg(1500 * time.Millisecond)
			if err == nil {
				return true, fmt.Errorf("received on %s: %s", m.Subject, m.Data)
			}
			return false, nil
		}
	}
	// Control: its own request subject answers.
	bus("request own list", request(protocol.BoardAgentSubject(self, protocol.BoardOpList), []byte(`{"v":1}`)))
	bus("request as victim", request(protocol.BoardAgentSubject(victim, protocol.BoardOpClaim), []byte(`{"v":1}`)))
	bus("publish as victim", publish(protocol.BoardAgentSubject(victim, protocol.BoardOpRelease), []byte(`{"v":1,"plan":"`+other+`","task":"held"}`)))
	bus("request as operator", request(protocol.BoardOperatorSubject(protocol.BoardOpList), []byte(`{"v":1}`)))
	forged, _ := json.Marshal(protocol.BoardTask{V: 1, Plan: mine, BoardTaskSpec: protocol.BoardTaskSpec{ID: "m2", Prompt: "forged"}, Status: protocol.BoardDone, CreatedBy: protocol.OperatorUser})
	kvKey := "$KV." + protocol.BoardBucket + "." + protocol.BoardKey(mine, "m2")
	bus("write bucket", publish(kvKey, forged))
	bus("write bucket with ack", request(kvKey, forged))
	bus("direct get", request("$JS.API.DIRECT.GET."+protocol.BoardStream+".$KV."+protocol.BoardBucket+"."+protocol.BoardKey(other, "secret"), nil))
	bus("direct get by body", request("$JS.API.DIRECT.GET."+protocol.BoardStream, []byte(`{"last_by_subj":"$KV.`+protocol.BoardBucket+`.`+protocol.BoardKey(other, "secret")+`"}`)))
	bus("stream info", request("$JS.API.STREAM.INFO."+protocol.BoardStream, nil))
	bus("stream msg get", request("$JS.API.STREAM.MSG.GET."+protocol.BoardStream, []byte(`{"seq":1}`)))
	bus("consumer create", request("$JS.API.CONSUMER.CREATE."+protocol.BoardStream, []byte(`{"stream_name":"`+protocol.BoardStream+`","config":{"deliver_policy":"all","ack_policy":"none","inactive_threshold":10000000000}}`)))
	bus("named consumer create", request("$JS.API.CONSUMER.CREATE."+protocol.BoardStream+".evil.$KV."+protocol.BoardBucket+".>", []byte(`{"stream_name":"`+protocol.BoardStream+`","config":{"name":"evil","deliver_policy":"all","ack_policy":"none","filter_subject":"$KV.`+protocol.BoardBucket+`.>","inactive_threshold":10000000000}}`)))
	bus("stream purge", request("$JS.API.STREAM.PURGE."+protocol.BoardStream, nil))
	objStream := "OBJ_" + protocol.ArtifactBucket
	bus("artifact direct get", request("$JS.API.DIRECT.GET."+objStream, []byte(`{"seq":1}`)))
	bus("artifact stream info", request("$JS.API.STREAM.INFO."+objStream, nil))
	bus("artifact chunk write", publish("$O."+protocol.ArtifactBucket+".C.evil", []byte("forged")))
	bus("subscribe artifacts", subscribe("$O."+protocol.ArtifactBucket+".>"))
	bus("subscribe events", subscribe(protocol.SubjectBoardEvents))
	bus("subscribe other plan events", subscribe("board.events."+other+".>"))
	bus("subscribe bucket", subscribe("$KV."+protocol.BoardBucket+".>"))
	// Answering other agents' requests would make it the board to them.
	bus("subscribe agents' requests", subscribe(protocol.SubjectBoardAgentRequests))
	bus("serve in the board's queue group", func() (bool, error) {
		_, err := nc.QueueSubscribeSync(protocol.SubjectBoardAgentRequests, protocol.BoardQueueGroup)
		return false, err
	})
	bus("subscribe operator requests", subscribe(protocol.SubjectBoardOperator))
	// A request whose reply subject is not its own reply inbox: its own
	// inbox, as if from the operator. The service, which may publish
	// anywhere, must not answer there (nor do what was asked): its answer
	// would wait in this agent's mailbox as a message from the operator,
	// and the runtime would store it in the inbox directory.
	{
		forged := protocol.InboxSubject(self, protocol.OperatorUser)
		dir := filepath.Join(os.Getenv("SHARED_DIR"), "agents", self, "inbox")
		before := map[string]bool{}
		if es, err := os.ReadDir(dir); err == nil {
			for _, e := range es {
				before[e.Name()] = true
			}
		} else {
			fail(fmt.Errorf("read its inbox directory: %w", err))
		}
		m := nats.NewMsg(protocol.BoardAgentSubject(self, protocol.BoardOpList))
		m.Reply, m.Data = forged, []byte(`{"v":1}`)
		if err := nc.PublishMsg(m); err != nil {
			fail(err)
		}
		out["answer into its inbox as the operator"] = "unanswered"
		time.Sleep(3 * time.Second)
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if before[e.Name()] {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && strings.Contains(string(b), `"subject": "`+forged+`"`) {
				out["answer into its inbox as the operator"] = "answered: " + e.Name()
			}
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

// boardFlood is a hostile agent trying to take the board down for
// everyone (TestHostileBoardFlood): it claims plan/task (its own), adds
// subtasks with prompts at their largest until its quota stops it, then
// sends list requests as fast as its connection takes them for d, with a
// reply subject nobody listens on, so that the board's replies pile up
// wherever they can. It prints a JSON object: added, sent.
func boardFlood(url, seedFile, plan, task string, d time.Duration) {
	self := os.Getenv("AGENT_ID")
	cl, nc := boardConn(url, seedFile, make(chan error, 8))
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.Claim(ctx, plan, task, ""); err != nil {
		fail(err)
	}
	big := strings.Repeat("x", protocol.MaxBoardPrompt-64)
	added := 0
	for ; added < protocol.DefaultBoardAddQuota; added++ {
		if _, err := cl.Add(ctx, plan, task, protocol.BoardTaskSpec{ID: fmt.Sprintf("flood-%d", added), Prompt: big}); err != nil {
			break
		}
	}
	subject := protocol.BoardAgentSubject(self, protocol.BoardOpList)
	nobody := protocol.InboxPrefix(self) + ".nobody"
	end := time.Now().Add(d)
	sent := 0
	for ; time.Now().Before(end); sent++ {
		if err := nc.PublishRequest(subject, nobody, []byte(`{"v":1}`)); err != nil {
			fail(err)
		}
	}
	_ = nc.Flush()
	b, _ := json.Marshal(map[string]any{"added": added, "sent": sent})
	fmt.Println(string(b))
}
