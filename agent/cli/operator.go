package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// operatorCmd is what every operator command shares: the common flags
// beside its own, parsing, and (run) the connection, interruption, a time
// limit and the exit code of an error.
type operatorCmd struct {
	fs  *flag.FlagSet
	c   common
	env Env
	sio IO
}

func newOperatorCmd(name string, env Env, sio IO) *operatorCmd {
	o := &operatorCmd{fs: newFlagSet(name, sio), env: env, sio: sio}
	o.c.register(o.fs, env)
	return o
}

// parse parses args; it returns false (and the exit code) on a usage error or -h.
func (o *operatorCmd) parse(args []string) (int, bool) { return parse(o.fs, args) }

// run connects to the bus and calls fn with a context cancelled on SIGINT or
// SIGTERM (main's) and after limit (0: no limit). fn returns the exit code of what it
// did, or an error that exitFor prints and maps.
func (o *operatorCmd) run(ctx context.Context, limit time.Duration, fn func(context.Context, *operator.Client) (int, error)) int {
	cl, err := operator.Connect(o.c.url, operator.Credential{File: o.c.nkey, Seed: o.c.seed})
	if err != nil {
		fmt.Fprintf(o.sio.Err, "flock-agent: bus %s: %v\n", o.c.url, err)
		return ExitBus
	}
	defer cl.Close()
	return within(ctx, limit, o.sio, func(ctx context.Context) (int, error) { return fn(ctx, cl) })
}

// exitFor maps an operator error to an exit code and prints it.
func exitFor(err error, sio IO) int {
	fmt.Fprintln(sio.Err, "flock-agent:", err)
	var fe *protocol.FieldError
	var be *protocol.BoardError
	switch {
	case errors.As(err, &be):
		return ExitTaskFailed // the board refused: its message and code are printed
	case errors.Is(err, operator.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return ExitTimeout
	case errors.Is(err, operator.ErrUnknownAgent), errors.Is(err, operator.ErrNoAgents), errors.Is(err, mailbox.ErrNoMailbox):
		return ExitUnknownAgent
	case errors.As(err, &fe):
		return ExitUsage
	}
	return ExitBus
}

func taskCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("task", env, sio)
	fs := o.fs
	var t operator.Target
	var envs multiFlag
	fs.StringVar(&t.Agent, "agent", "", "run on this agent (tasks.<id>)")
	fs.BoolVar(&t.Pool, "pool", false, "run on exactly one agent of the pool (tasks.pool)")
	fs.BoolVar(&t.All, "all", false, "run on every agent (tasks.all); waits for one result per agent consumer on the bus")
	kind := fs.String("kind", "", "task kind: exec (default with a command) or echo")
	id := fs.String("id", "", "task ID (default: generated)")
	timeout := fs.Duration("timeout", 0, "task timeout (default: the agent's TASK_TIMEOUT)")
	wait := fs.Duration("wait", 0, "how long to wait for results (default: timeout + 30s, or 5m30s)")
	stdin := fs.String("stdin", "", "text for the task's stdin ('-': read this command's stdin)")
	dir := fs.String("dir", "", "working directory, relative to the task directory")
	fs.Var(&envs, "env", "NAME=VALUE for the task process (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(sio.Err, "usage: flock-agent task (--agent ID | --pool | --all) [flags] -- COMMAND [ARGS...]")
		fs.PrintDefaults()
	}
	if code, ok := o.parse(args); !ok {
		return code
	}
	rest := fs.Args()
	task := protocol.Task{V: protocol.Version, ID: *id, Kind: *kind, Dir: *dir, Timeout: protocol.Duration(*timeout)}
	if len(rest) > 0 {
		task.Command, task.Args = rest[0], rest[1:]
	}
	if task.Kind == protocol.KindEcho {
		task.Command, task.Args = "", rest
	}
	if *stdin == "-" {
		b, err := io.ReadAll(sio.In)
		if err != nil {
			fmt.Fprintln(sio.Err, "flock-agent: stdin:", err)
			return ExitUsage
		}
		task.Stdin = string(b)
	} else {
		task.Stdin = *stdin
	}
	for _, kv := range envs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(sio.Err, "flock-agent: --env %q: want NAME=VALUE\n", kv)
			return ExitUsage
		}
		if task.Env == nil {
			task.Env = map[string]string{}
		}
		task.Env[k] = v
	}
	if _, err := t.Subject(); err != nil {
		fmt.Fprintln(sio.Err, "flock-agent task:", err)
		fs.Usage()
		return ExitUsage
	}
	if task.Kind == "" && task.Command == "" {
		fmt.Fprintln(sio.Err, "flock-agent task: give a command after -- (or --kind echo)")
		return ExitUsage
	}
	if *wait <= 0 {
		*wait = 5*time.Minute + 30*time.Second
		if *timeout > 0 {
			*wait = *timeout + 30*time.Second
		}
	}
	ctx = traced(ctx, env, sio)
	return o.run(ctx, *wait, func(ctx context.Context, cl *operator.Client) (int, error) {
		failed := false
		_, err := cl.RunChecked(ctx, t, task, func(r protocol.Result) {
			if !r.OK() {
				failed = true
			}
			printResult(r, o.c.json, sio)
		}, func(r protocol.Result) {
			fmt.Fprintf(sio.Err, "flock-agent: ignored a forged result of task %s from %s: it lacks the task's nonce, so the bus never gave %s this task\n", r.TaskID, r.Agent, r.Agent)
		})
		if failed {
			return ExitTaskFailed, err
		}
		return ExitOK, err
	})
}

func printResult(r protocol.Result, asJSON bool, sio IO) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(sio.Out, string(b))
		return
	}
	status := r.Status
	if r.ExitCode != nil {
		status += fmt.Sprintf(" (exit %d)", *r.ExitCode)
	}
	if r.Signal != "" {
		status += " (" + r.Signal + ")"
	}
	fmt.Fprintf(sio.Out, "[%s] %s in %.1f ms, task %s, attempt %d\n", r.Agent, status, r.DurationMS, r.TaskID, r.Attempt)
	if r.Error != "" {
		fmt.Fprintf(sio.Out, "[%s] error: %s\n", r.Agent, r.Error)
	}
	if r.Stdout != "" {
		fmt.Fprint(sio.Out, r.Stdout)
		if !strings.HasSuffix(r.Stdout, "\n") {
			fmt.Fprintln(sio.Out)
		}
	}
	if r.Stderr != "" {
		fmt.Fprint(sio.Err, r.Stderr)
		if !strings.HasSuffix(r.Stderr, "\n") {
			fmt.Fprintln(sio.Err)
		}
	}
	if r.Truncated {
		fmt.Fprintf(sio.Out, "[%s] output truncated (%d bytes stdout, %d stderr); full capped output in %s\n", r.Agent, r.StdoutBytes, r.StderrBytes, r.Dir)
	}
}

func sendCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("send", env, sio)
	fs := o.fs
	to := fs.String("to", "", "agent ID (required)")
	wait := fs.Duration("wait", 5*time.Second, "how long to wait for the agent to take the message (past it: queued)")
	if code, ok := o.parse(args); !ok {
		return code
	}
	if *to == "" || fs.NArg() == 0 {
		fmt.Fprintln(sio.Err, "usage: flock-agent send --to ID MESSAGE...")
		return ExitUsage
	}
	msg := protocol.Message{ID: mailbox.NewID(), Body: strings.Join(fs.Args(), " ")}
	return o.run(ctx, *wait+10*time.Second, func(ctx context.Context, cl *operator.Client) (int, error) {
		r, err := cl.Send(ctx, *to, msg, *wait)
		if err != nil {
			return 0, err
		}
		switch {
		case o.c.json:
			b, _ := json.Marshal(map[string]any{"id": msg.ID, "to": *to, "status": r.Status, "seq": r.Seq, "file": r.File})
			fmt.Fprintln(sio.Out, string(b))
		case r.Status == protocol.ReceiptDelivered:
			fmt.Fprintf(sio.Out, "delivered %s to %s: %s\n", msg.ID, *to, r.File)
		default:
			fmt.Fprintf(sio.Out, "queued %s for %s (mailbox seq %d): %s takes it when it runs\n", msg.ID, *to, r.Seq, *to)
		}
		return ExitOK, nil
	})
}

func broadcastCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("broadcast", env, sio)
	fs := o.fs
	wait := fs.Duration("wait", 5*time.Second, "how long to wait for every agent's receipt")
	if code, ok := o.parse(args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(sio.Err, "usage: flock-agent broadcast MESSAGE...")
		return ExitUsage
	}
	msg := protocol.Message{ID: operator.NewTaskID()[2:], Body: strings.Join(fs.Args(), " ")}
	return o.run(ctx, *wait, func(ctx context.Context, cl *operator.Client) (int, error) {
		receipts, missing, err := cl.Broadcast(ctx, msg)
		if err != nil {
			return 0, err
		}
		stored := 0
		for _, r := range receipts {
			if r.Error != "" {
				fmt.Fprintf(sio.Err, "%s refused broadcast %s: %s\n", r.To, msg.ID, r.Error)
				continue
			}
			stored++
		}
		fmt.Fprintf(sio.Out, "broadcast %s stored by %d of %d agents\n", msg.ID, stored, len(receipts)+len(missing))
		if len(missing) > 0 {
			fmt.Fprintf(sio.Err, "no receipt within %s from: %s\n", *wait, strings.Join(missing, ", "))
			return ExitTimeout, nil
		}
		if stored < len(receipts) {
			return ExitBus, nil // refused, as send's refusals
		}
		return ExitOK, nil
	})
}

func watchCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("watch", env, sio)
	only := o.fs.String("agent", "", "only this agent")
	noHB := o.fs.Bool("no-heartbeats", false, "hide heartbeats")
	if code, ok := o.parse(args); !ok {
		return code
	}
	return o.run(ctx, 0, func(ctx context.Context, cl *operator.Client) (int, error) {
		return ExitOK, cl.Watch(ctx, func(it operator.Item) {
			if (*only != "" && it.Agent != *only) || (*noHB && it.Kind == "heartbeat") {
				return
			}
			printItem(it, o.c.json, sio)
		})
	})
}

func printItem(it operator.Item, asJSON bool, sio IO) {
	if asJSON {
		out := map[string]any{"kind": it.Kind, "subject": it.Subject, "agent": it.Agent, "body": json.RawMessage(it.Data)}
		if !json.Valid(it.Data) {
			out["body"] = string(it.Data)
		}
		if it.Kind == "dead" {
			out["headers"] = it.Header
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(sio.Out, string(b))
		return
	}
	ts := time.Now().Format("15:04:05.000")
	switch it.Kind {
	case "heartbeat":
		var hb protocol.Heartbeat
		_ = json.Unmarshal(it.Data, &hb)
		fmt.Fprintf(sio.Out, "%s heartbeat %-12s %-8s running=%d done=%d failed=%d\n", ts, it.Agent, hb.State, hb.Running, hb.Completed, hb.Failed)
	case "event":
		var e protocol.Event
		_ = json.Unmarshal(it.Data, &e)
		fmt.Fprintf(sio.Out, "%s event     %-12s %s %s %s\n", ts, it.Agent, e.Type, e.Ref, e.Detail)
	case "result":
		var r protocol.Result
		_ = json.Unmarshal(it.Data, &r)
		extra := ""
		if r.ExitCode != nil {
			extra = fmt.Sprintf(" exit=%d", *r.ExitCode)
		}
		if r.Error != "" {
			extra += " error=" + r.Error
		}
		fmt.Fprintf(sio.Out, "%s result    %-12s %s %s%s %.1fms (%s seq %d)\n", ts, it.Agent, r.TaskID, r.Status, extra, r.DurationMS, r.Subject, r.Seq)
	case "dead":
		fmt.Fprintf(sio.Out, "%s dead      %s %s seq %s: %s\n", ts, it.Header.Get(protocol.HeaderDeadConsumer),
			it.Header.Get(protocol.HeaderOriginalSubject), it.Header.Get(protocol.HeaderOriginalSeq), it.Header.Get(protocol.HeaderDeadReason))
	default:
		fmt.Fprintf(sio.Out, "%s %s %s\n", ts, it.Subject, it.Data)
	}
}

func agentsCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("agents", env, sio)
	listen := o.fs.Duration("listen", 35*time.Second, "without a status stream on the bus: how long to listen for heartbeats")
	if code, ok := o.parse(args); !ok {
		return code
	}
	var list []operator.AgentStatus
	if code := o.run(ctx, *listen+10*time.Second, func(ctx context.Context, cl *operator.Client) (code int, err error) {
		list, err = cl.Status(ctx, *listen)
		return ExitOK, err
	}); code != ExitOK {
		return code
	}
	if o.c.json {
		for _, a := range list {
			b, _ := json.Marshal(a)
			fmt.Fprintln(sio.Out, string(b))
		}
		return ExitOK
	}
	tw := tabwriter.NewWriter(sio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tLAST HEARTBEAT\tRUNNING\tPENDING\tDONE\tFAILED\tLISTENING\tNOTE")
	for _, a := range list {
		state, last, done, failed := "-", "never", "-", "-"
		if a.Last != nil {
			state, last = a.Last.State, a.Age+" ago"
			done, failed = fmt.Sprint(a.Last.Completed), fmt.Sprint(a.Last.Failed)
		}
		note := ""
		switch {
		case !a.InTopology:
			note = "no task consumer on the bus yet (the topology not applied?)"
		case a.Stale:
			note = "stale: down or not started"
		}
		listening := "no"
		if a.Waiting > 0 {
			listening = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", a.ID, state, last, a.Running, a.Pending, done, failed, listening, note)
	}
	_ = tw.Flush()
	return ExitOK
}

func deadCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("dead", env, sio)
	n := o.fs.Int("n", 20, "how many of the most recent")
	if code, ok := o.parse(args); !ok {
		return code
	}
	var msgs []jetstream.RawStreamMsg
	if code := o.run(ctx, 10*time.Second, func(ctx context.Context, cl *operator.Client) (code int, err error) {
		msgs, err = cl.DeadLetters(ctx, *n)
		return ExitOK, err
	}); code != ExitOK {
		return code
	}
	for _, m := range msgs {
		if o.c.json {
			b, _ := json.Marshal(map[string]any{"seq": m.Sequence, "subject": m.Subject, "time": m.Time, "headers": m.Header, "body": string(m.Data)})
			fmt.Fprintln(sio.Out, string(b))
			continue
		}
		fmt.Fprintf(sio.Out, "%s %s (was %s seq %s): %s\n  %s\n", m.Time.Format(time.RFC3339), m.Subject,
			m.Header.Get(protocol.HeaderOriginalSubject), m.Header.Get(protocol.HeaderOriginalSeq),
			m.Header.Get(protocol.HeaderDeadReason), m.Data)
	}
	return ExitOK
}
