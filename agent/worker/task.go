package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// inlineMax is how much of stdout and of stderr a result carries inline;
// the task directory keeps up to MAX_OUTPUT_BYTES of each.
const inlineMax = 32 << 10

// handle runs one delivered task and answers it: every delivery that is not
// handed back ends with a result on task.result.<id> and an ack.
func (a *Agent) handle(msg delivery, keep time.Duration) {
	defer a.inflight.Done()
	defer a.slots.release()

	res := protocol.Result{V: protocol.Version, Agent: a.cfg.ID, Subject: msg.Subject(), Started: time.Now().UTC()}
	res.Seq, res.Attempt = msg.Meta()
	if msg.Subject() == protocol.PoolTaskSubject(a.cfg.ID) {
		// A pool task the bus gave this agent: the result names it as the
		// operator sent it (tasks.pool, its sequence there), and the bus
		// alone can publish here, so its headers are to be believed.
		if seq, attempt, ok := protocol.PoolOrigin(msg.Headers().Get); ok {
			res.Subject, res.Seq, res.Attempt = protocol.SubjectTasksPool, seq, attempt
		}
	}
	task, err := protocol.DecodeTask(msg.Data(), a.cfg.MaxTaskBytes)
	res.TaskID, res.Kind, res.Nonce = task.ID, task.Kind, task.Nonce
	log := a.log.With("task", task.ID, "seq", res.Seq, "subject", res.Subject, "attempt", res.Attempt)
	// The operator's trace, if the task carries one: the task runs as a
	// span of its own in it. A malformed one is dropped, never a refusal.
	var span string
	if h := msg.Headers().Get(protocol.HeaderTraceparent); h != "" {
		if tp, err := protocol.ParseTraceparent(h); err == nil {
			child := tp.Child()
			span, res.Trace = child.String(), child.Trace()
			res.Span, res.ParentSpan = child.SpanHex(), tp.SpanHex()
			log = log.With("trace_id", res.Trace)
		} else {
			log.Warn("task's trace context dropped", "err", err)
		}
	}
	switch {
	case err != nil:
		res.Status, res.Error = protocol.StatusRejected, err.Error()
		log.Warn("task rejected", "err", err)
		a.event(protocol.EventTaskRejected, task.ID, err.Error())
	case task.Kind == protocol.KindEcho:
		out := task.Stdin
		if out == "" {
			out = strings.Join(task.Args, " ")
		}
		zero := 0
		res.Status, res.ExitCode = protocol.StatusOK, &zero
		res.Stdout, res.StdoutBytes = out, int64(len(out))
		if len(out) > inlineMax {
			res.Stdout, res.Truncated = out[:inlineMax], true
		}
	case task.Kind == protocol.KindExec:
		log.Info("task started", "command", task.Command)
		if err := a.runExec(msg, &task, &res, keep, nil, span); errors.Is(err, errHandback) {
			log.Warn("task interrupted by shutdown: handed back for redelivery")
			_ = msg.Nak()
			return
		}
	}
	res.Finished = time.Now().UTC()
	res.DurationMS = float64(res.Finished.Sub(res.Started).Microseconds()) / 1000
	if res.Dir != "" {
		a.writeResultFile(&res)
	}
	if err := a.publishResult(msg, &res, keep); err != nil {
		log.Error("result not published: task left for redelivery", "err", err)
		_ = msg.Nak()
		return
	}
	if err := msg.Ack(); err != nil {
		log.Warn("ack failed: the task may be redelivered", "err", err)
	}
	a.completed.Add(1)
	if !res.OK() {
		a.failed.Add(1)
	}
	if task.Kind == protocol.KindExec {
		log.Info("task finished", "status", res.Status, "exit_code", res.ExitCode, "duration_ms", res.DurationMS)
		if a.tasksDone.Add(1)%32 == 0 {
			select {
			case a.pruneReq <- "tasks":
			default:
			}
		}
	} else {
		log.Debug("task finished", "status", res.Status)
	}
}

// publishResult stores the result in FLOCK_RESULTS (JetStream confirms it),
// retrying while the bus is away; the message ID makes a retry of a result
// that did arrive harmless.
func (a *Agent) publishResult(msg delivery, res *protocol.Result, keep time.Duration) error {
	b, _ := protocol.Encode(res, false)
	if max := a.nc.MaxPayload(); max > 0 && int64(len(b)) > max-1024 {
		res.Stdout, res.Stderr, res.Truncated = "", "", true
		b, _ = protocol.Encode(res, false)
	}
	m := nats.NewMsg(protocol.ResultSubject(a.cfg.ID))
	m.Data = b
	if res.Seq > 0 {
		m.Header.Set(nats.MsgIdHdr, a.cfg.ID+"."+strconv.FormatUint(res.Seq, 10))
	}
	deadline := time.Now().Add(max(keep*3, 10*time.Second))
	backoff := 100 * time.Millisecond
	lastProgress := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := a.js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || a.handback.Load() {
			return err
		}
		a.log.Warn("result not stored yet, retrying", "task", res.TaskID, "err", err)
		if time.Since(lastProgress) > keep {
			_ = msg.InProgress()
			lastProgress = time.Now()
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
}

// writeResultFile writes result.json into the task directory.
func (a *Agent) writeResultFile(res *protocol.Result) {
	b, _ := protocol.Encode(res, true)
	p := filepath.Join(a.tasksDir, res.TaskID, "result.json")
	if err := writeAtomic(p, append(b, '\n')); err != nil {
		a.log.Warn("result file not written", "task", res.TaskID, "err", err)
	}
}

// taskDir is the task directory as the agent sees it.
func (a *Agent) taskDir(id string) string { return filepath.Join(a.tasksDir, id) }

// writeAtomic replaces p with b: readers see the old or the new file, whole.
func writeAtomic(p string, b []byte) error { return replaceFile(p, b, false) }

// writeDurable is writeAtomic that reaches the disk before it returns (the
// file and its directory entry synced): a message is confirmed to its sender
// only once it would survive a crash of the host.
func writeDurable(p string, b []byte) error { return replaceFile(p, b, true) }

// replaceFile writes b to a temporary file beside p and renames it over p;
// with sync, the file before the rename and the directory after it.
func replaceFile(p string, b []byte, sync bool) error {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if !sync {
		return nil
	}
	d, err := os.Open(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func taskTimeout(t *protocol.Task, def time.Duration) time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout)
	}
	return def
}

func errorResult(res *protocol.Result, format string, args ...any) error {
	res.Status, res.Error = protocol.StatusError, fmt.Sprintf(format, args...)
	return nil
}
