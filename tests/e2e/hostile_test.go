package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// Attacks a hostile agent makes from inside its container with its own key.

// agent-1 floods its own result subject with twice its share of the store:
// agent-2's stored results survive and agent-2 still stores new ones.
func TestHostileResultsFlood(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	f, a1, a2 := needTwo(t)
	_, js, rs := jsResults(t)
	before := taskID(t, "before")
	publish(t, js, protocol.TaskSubject(a2), taskEcho(before, "kept"))
	rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[before]) > 0 })

	// Twice agent-1's share of the store, whatever the flock under test
	// declares (the replay sets 8 MiB; a deployed default flock more).
	share := func(id string) uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, protocol.ResultsStream(id))
		if err != nil {
			t.Fatal(err)
		}
		return uint64(s.CachedInfo().Config.MaxBytes)
	}
	floodMiB := 2 * share(a1) >> 20
	// The bus reads at most flock:bus.peerKiBps from agent-1 (1 MiB/s by
	// default): give the flood the time that takes.
	budget := time.Duration(floodMiB)*time.Second + 60*time.Second
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), budget+10*time.Second)
	defer cancel()
	res, err := f.engine.Exec(ctx, container(a1), []string{f.probe[a1], "flood-results", "nats://bus:4222", protocol.ContainerCredsFile, strconv.FormatUint(floodMiB, 10), budget.String()}, "AGENT_ID="+a1)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("results flood: exit %d %v %q", res.ExitCode, err, res.Stdout)
	}
	out := res.Stdout
	t.Logf("agent-1: %s (%d MiB against a %d MiB share) in %s", strings.TrimSpace(out), floodMiB, share(a1)>>20, time.Since(start).Round(time.Millisecond))

	after := taskID(t, "after")
	publish(t, js, protocol.TaskSubject(a2), taskEcho(after, "still stored"))
	got := rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[after]) > 0 })
	if len(got[before]) == 0 || got[before][0].Agent != a2 {
		t.Fatalf("agent-2's result stored before agent-1's flood is gone")
	}
	for _, id := range []string{a1, a2} {
		s, err := js.Stream(ctx, protocol.ResultsStream(id))
		if err != nil {
			t.Fatal(err)
		}
		st, limit := s.CachedInfo().State, uint64(s.CachedInfo().Config.MaxBytes)
		if st.Bytes > limit {
			t.Errorf("%s's results stream holds %d bytes, over its %d", id, st.Bytes, limit)
		}
		t.Logf("%s's results stream: %d KiB in %d messages (share %d MiB)", id, st.Bytes>>10, st.Msgs, limit>>20)
	}
}

// agent-1, which may not read the pool's consumer, claims the pool task
// another agent runs by its sequence (the test lets it guess right); the
// operator counts only the result with the task's nonce.
func TestHostileForgedPoolResult(t *testing.T) {
	f := need(t)
	a1 := f.agents[0]
	nc, js := jsClient(t)
	cl := operatorOn(t, nc)
	ready := readyMark(t, f, a1, "forger")
	stream, err := js.Stream(context.Background(), protocol.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	next := stream.CachedInfo().State.LastSeq + 1 // the pool task's sequence, give or take
	forged := probeAsync(a1, 60*time.Second, "forge-pool", "nats://bus:4222", protocol.ContainerCredsFile,
		strconv.FormatUint(next, 10), "4")
	// The task goes out once the forger is watching (it says so with a
	// file in agent-1's directory).
	ready()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var reported []protocol.Result
	res, err := cl.RunChecked(ctx, operator.Target{Pool: true}, taskExec(taskID(t, "pool"), "sleep", "2s"), nil,
		func(r protocol.Result) { reported = append(reported, r) })
	if err != nil {
		t.Fatal(err)
	}
	fo := <-forged
	if err := fo.ended(); err != nil {
		t.Fatalf("the forger: %v: %s", err, fo.all())
	}
	t.Logf("agent-1: %s", strings.TrimSpace(fo.all()))
	if len(res) != 1 || !res[0].OK() || res[0].Stdout == "forged" {
		t.Fatalf("results %+v: want the one real result", res)
	}
	if len(reported) == 0 || reported[0].Agent != a1 || reported[0].Stdout != "forged" {
		t.Fatalf("forged results reported: %+v", reported)
	}
	t.Logf("real result from %s; forged one from %s ignored", res[0].Agent, reported[0].Agent)
}

// agent-1 takes pool tasks and sits on them, as many as it can get, for 40 s:
// it is given no more at once than its 2 slots (the bus hands the pool out
// to agents' own consumers, whose bound the server keeps), and each is taken
// back after its timeout and the pool's grace and run by another agent.
// Before, agent-1 pulled the shared pool consumer and held what it asked for.
func TestHostilePoolHoarder(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	f := need(t)
	a1 := f.agents[0]
	nc, _ := jsClient(t)
	cl := operatorOn(t, nc)
	ready := readyMark(t, f, a1, "hoarder")
	hoarded := probeAsync(a1, 90*time.Second, "hoard-pool", "nats://bus:4222", protocol.ContainerCredsFile, "40s")
	ready()

	// Six pool tasks of 2 s timeout, sent while agent-1's runtime and the
	// hoarder both pull agent-1's consumer.
	const n = 6
	type run struct {
		res  []protocol.Result
		err  error
		took time.Duration
	}
	runs := make(chan run, n)
	for i := range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
			defer cancel()
			task := taskEcho(taskID(t, fmt.Sprint("hoard", i)), "pooled")
			task.Timeout = protocol.Duration(2 * time.Second)
			start := time.Now()
			res, err := cl.Run(ctx, operator.Target{Pool: true}, task, nil)
			runs <- run{res, err, time.Since(start)}
		}()
	}
	bySeq := map[uint64]protocol.Result{}
	var slowest time.Duration
	for range n {
		r := <-runs
		if r.err != nil || len(r.res) != 1 || !r.res[0].OK() {
			t.Fatalf("a pool task while agent-1 hoards: %v %+v", r.err, r.res)
		}
		bySeq[r.res[0].Seq] = r.res[0]
		slowest = max(slowest, r.took)
	}
	o := <-hoarded
	if err := o.ended(); err != nil {
		t.Fatalf("the hoarder: %v: %s", err, o.all())
	}
	var got struct {
		Given []string `json:"given"`
		Most  int      `json:"most"`
	}
	if err := json.Unmarshal([]byte(lastLine(o.all())), &got); err != nil {
		t.Fatalf("hoarder output %q: %v", o.all(), err)
	}
	if got.Most > 2 {
		t.Fatalf("agent-1 held %d pool tasks at once: more than its 2 slots", got.Most)
	}
	for _, s := range got.Given {
		seq, _ := strconv.ParseUint(s, 10, 64)
		if r, ok := bySeq[seq]; ok && r.Attempt < 2 {
			t.Errorf("pool task %d, held by the hoarder, was answered at attempt %d by %s: it was never taken back", seq, r.Attempt, r.Agent)
		}
	}
	// Taken back at timeout (2 s) + grace (15 s), found by a sweep (2 s).
	if limit := 2*time.Second + 15*time.Second + 2*time.Second + 15*time.Second; slowest > limit {
		t.Errorf("the slowest pool task took %s (limit %s)", slowest, limit)
	}
	t.Logf("agent-1 took %d pool tasks (%v), at most %d at once; all %d answered, the slowest after %s",
		len(got.Given), got.Given, got.Most, n, slowest.Round(time.Millisecond))
}

// agent-1 writes four times its disk quota into its own directory: the write
// stops with ENOSPC at the quota, the host's disk (where the bus's store and
// the other agents' images live) gives nothing, and agent-2 works on.
func TestHostileDiskFill(t *testing.T) {
	f, a1, a2 := needTwo(t)
	dir1 := filepath.Join(f.sharedRoot, "agents", a1)
	var fs, before, after syscall.Statfs_t
	if err := syscall.Statfs(dir1, &fs); err != nil {
		t.Fatal(err)
	}
	quota := int64(fs.Blocks) * int64(fs.Bsize)
	// The host's own disk: the shared root's logs directory is on it (and,
	// in the default layout, the state root with the images and the bus's
	// store).
	hostDisk := filepath.Join(f.sharedRoot, "logs")
	if err := syscall.Statfs(hostDisk, &before); err != nil {
		t.Fatal(err)
	}
	junk := "/shared/agents/" + a1 + "/junk"
	t.Cleanup(func() { _ = os.Remove(filepath.Join(dir1, "junk")) })
	start := time.Now()
	out := mustFail(t, a1, "fill", junk, strconv.FormatInt(4*quota>>20, 10))
	took := time.Since(start)
	if err := syscall.Statfs(hostDisk, &after); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "errno 28") { // ENOSPC
		t.Errorf("agent-1 writing %d MiB into a %d MiB directory: %q, want ENOSPC", 4*quota>>20, quota>>20, out)
	}
	hostUsed := (int64(before.Bavail) - int64(after.Bavail)) * int64(before.Bsize)
	if hostUsed > quota/2 {
		t.Errorf("the host's disk lost %d MiB while agent-1 filled its %d MiB", hostUsed>>20, quota>>20)
	}
	t.Logf("agent-1: %s after %s (quota %d MiB filesystem); host free space changed by %d KiB", strings.Join(strings.Fields(out), " "), took.Round(time.Millisecond), quota>>20, hostUsed>>10)
	mustSucceed(t, a2, "write", "/shared/agents/"+a2+"/probe-write")
	roundTrip(t, a2)
}

// agent-1 writes into its own log file (a host path, bind-mounted) as much
// as it can: the file lives on a filesystem of its own, so the write stops
// with ENOSPC there and the host's free space does not move; the runtime
// makes room in its log and goes on logging.
func TestHostileLogFill(t *testing.T) {
	f, a1, a2 := needTwo(t)
	hostLog := filepath.Join(f.sharedRoot, "logs", a1, a1+".log")
	hostDisk := filepath.Join(f.sharedRoot, "logs")
	var before, after syscall.Statfs_t
	if err := syscall.Statfs(hostDisk, &before); err != nil {
		t.Fatal(err)
	}
	const attempt = 512 // MiB
	start := time.Now()
	out := mustFail(t, a1, "fill", protocol.ContainerLogFile(a1), strconv.Itoa(attempt), "last")
	took := time.Since(start)
	if err := syscall.Statfs(hostDisk, &after); err != nil {
		t.Fatal(err)
	}
	hostUsed := (int64(before.Bavail) - int64(after.Bavail)) * int64(before.Bsize)
	t.Logf("agent-1 writing %d MiB into %s: %s after %s; host free space changed by %d KiB",
		attempt, protocol.ContainerLogFile(a1), strings.Join(strings.Fields(out), " "), took.Round(time.Millisecond), hostUsed>>10)
	if !strings.Contains(out, "errno 28") { // ENOSPC
		t.Errorf("agent-1 wrote %d MiB into its log file: %q, want ENOSPC", attempt, out)
	}
	if hostUsed > 64<<20 {
		t.Errorf("the host's disk lost %d MiB to agent-1's log", hostUsed>>20)
	}
	if st, err := os.Stat(hostLog); err != nil {
		t.Fatalf("agent-1's log on the host: %v", err)
	} else if st.Size() > flock.LogDiskMiB<<20 {
		t.Errorf("agent-1's log is %d MiB on the host, more than its %d MiB filesystem", st.Size()>>20, flock.LogDiskMiB)
	}
	// The runtime still logs. Its lines fill what slack the filesystem has
	// left (ext4 frees a few KiB of reservations once the writer closes);
	// then its next write meets ENOSPC, and it truncates the file in place
	// and carries on: each exec task logs its start and end.
	_, js, rs := jsResults(t)
	var last string
	for i := 0; ; i++ {
		last = publishExec(t, js, a1, fmt.Sprint("after-log-fill-", i), "echo", strings.Repeat("logged ", 100))
		got := rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[last]) > 0 })
		if r := got[last][0]; !r.OK() {
			t.Fatalf("agent-1's task %d after the log fill: %+v", i, r)
		}
		b := readFile(t, hostLog)
		if _, after, ok := bytes.Cut(b, []byte("truncated in place")); ok && bytes.Contains(after, []byte(`"task":"`+last+`"`)) {
			t.Logf("agent-1's runtime met the full log after %d tasks, truncated it (%d bytes now) and logged on", i+1, len(b))
			break
		}
		if i == 200 {
			t.Fatalf("after %d tasks, agent-1's log (%d bytes) shows no truncation followed by the last task's lines", i+1, len(b))
		}
	}
	roundTrip(t, a2)
}

// agent-1 opens as many bus connections as its key gets and holds them. It
// gets its share (flock:bus.connectionsPerPeer, less what its runtime
// holds) and the rest are refused by name; meanwhile the operator connects,
// lists the agents and gets agent-2's results as when idle. Before the
// share, the server's one limit for everyone was reached at about 70
// connections and refused the operator too.
func TestHostileBusConnections(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	_, a1, a2 := needTwo(t)
	cl := operatorClient(t)
	roundTripTime := func(tag string) time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		res, err := cl.Run(ctx, operator.Target{Agent: a2}, taskEcho(taskID(t, tag), "rt"), nil)
		if err != nil || len(res) != 1 || !res[0].OK() {
			t.Fatalf("%s: agent-2's round trip: %v %+v", tag, err, res)
		}
		return time.Since(start)
	}
	idle := roundTripTime("idle")
	const attempt, share = 150, 8
	hold := 20 * time.Second
	done := probeAsync(a1, hold+2*time.Minute, "conns", "nats://bus:4222", protocol.ContainerCredsFile, strconv.Itoa(attempt), hold.String())
	time.Sleep(8 * time.Second) // the probe opens and is refused within this

	// The operator, as a new client, and agent-2, while agent-1 holds its share.
	start := time.Now()
	nc, err := fut.connect()
	if err != nil {
		t.Fatalf("the operator cannot connect while agent-1 holds its connections: %v", err)
	}
	nc.Close()
	connect := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	agents, err := cl.Agents(ctx)
	cancel()
	if err != nil || !slices.Contains(agents, a2) {
		t.Errorf("the operator lists %v (%v) while agent-1 holds its connections", agents, err)
	}
	during := roundTripTime("during")

	r := <-done
	if r.err != nil {
		t.Fatalf("probe: %v", r.err)
	}
	var got struct {
		Opened, Refused int
		Error           string
	}
	if err := json.Unmarshal([]byte(lastLine(r.out)), &got); err != nil {
		t.Fatalf("probe said %q: %v", r.out, err)
	}
	t.Logf("agent-1 tried %d connections: %d opened, %d refused (%q); meanwhile the operator connected in %s, agent-2's round trip %s (idle %s)",
		attempt, got.Opened, got.Refused, got.Error, connect.Round(time.Millisecond), during.Round(time.Millisecond), idle.Round(time.Millisecond))
	if got.Opened >= share || got.Opened == 0 {
		t.Errorf("agent-1 opened %d connections beside its runtime's: want at least 1, fewer than its share of %d", got.Opened, share)
	}
	if got.Opened+got.Refused != attempt || !strings.Contains(got.Error, "maximum connections per peer exceeded") {
		t.Errorf("agent-1's refusals: %d, first %q; want the rest refused with the reason", got.Refused, got.Error)
	}
	roundTrip(t, a1) // its own runtime kept its connection
}

// agent-1 publishes heartbeats and events on its own subjects as fast as it
// can: agent-2's task round trip stays within twice its idle figure.
func TestHostileStatusFlood(t *testing.T) {
	skipUnderGVisor(t, "under gVisor on 2 cores the round trip's own noise (1.5-3.0x with the per-peer limit, 1.7-4.6x without) hides the effect it measures")
	_, a1, a2 := needTwo(t)
	cl := operatorClient(t)
	median := func(tag string, n int) time.Duration {
		var ds []time.Duration
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			start := time.Now()
			res, err := cl.Run(ctx, operator.Target{Agent: a2}, taskEcho(taskID(t, fmt.Sprint(tag, i)), "rt"), nil)
			cancel()
			if err != nil || len(res) != 1 || !res[0].OK() {
				t.Fatalf("%s round trip %d: %v %+v", tag, i, err, res)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	idle := median("idle", 41)
	const flood = 25 * time.Second
	done := probeAsync(a1, flood+30*time.Second, "flood-status", "nats://bus:4222", protocol.ContainerCredsFile, flood.String())
	time.Sleep(3 * time.Second) // the flood at full speed
	loaded := median("flood", 41)
	r := <-done
	if r.err != nil || r.code != 0 {
		t.Fatalf("flood probe: exit %d %v %q", r.code, r.err, r.out)
	}
	t.Logf("agent-1: %s; agent-2's task round trip: median %s idle, %s under the flood (%.2fx)", strings.TrimSpace(r.out), idle.Round(time.Millisecond), loaded.Round(time.Millisecond), float64(loaded)/float64(idle))
	// Twice idle, plus 2 ms: round trips of a few ms on a 2-core machine
	// (the flooder itself holds half a core) jitter by that much unloaded.
	if loaded > 2*idle+2*time.Millisecond {
		t.Errorf("agent-2's round trip went from %s to %s under agent-1's flood: more than twice", idle, loaded)
	}
}

// operatorClient is an operator client on its own connection, closed when
// the test ends.
func operatorClient(t *testing.T) *operator.Client {
	t.Helper()
	nc, err := need(t).connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return operatorOn(t, nc)
}

// readyMark clears the file (.probe/<name>-ready in agent's directory) by
// which a probe started in agent says its attack is on; the wait returned
// waits up to 45 s for the file.
func readyMark(t *testing.T, f *flockUnderTest, agent, name string) (wait func()) {
	ready := filepath.Join(f.sharedRoot, "agents", agent, ".probe", name+"-ready")
	_ = os.Remove(ready)
	return func() {
		t.Helper()
		testkit.WaitEvery(t, 45*time.Second, 100*time.Millisecond, "the hostile task to say it is ready ("+ready+")", func() bool { _, err := os.Stat(ready); return err == nil })
	}
}

// replayExec is how a probe run in the background ended.
type replayExec struct {
	out, stderr string
	code        int
	err         error
}

// ended is the error the run ended with, one naming a non-zero exit if the
// run itself went well.
func (r replayExec) ended() error {
	if r.err == nil && r.code != 0 {
		return errors.New("exit " + strconv.Itoa(r.code))
	}
	return r.err
}

// all is what the probe wrote, on stdout then stderr.
func (r replayExec) all() string { return r.out + r.stderr }

// probeAsync runs the probe in an agent's container in the background, for
// an attack that goes on while the test measures.
func probeAsync(agent string, timeout time.Duration, args ...string) <-chan replayExec {
	done := make(chan replayExec, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r, err := fut.engine.Exec(ctx, container(agent), append([]string{fut.probe[agent]}, args...), "AGENT_ID="+agent)
		done <- replayExec{r.Stdout, r.Stderr, r.ExitCode, err}
	}()
	return done
}

// agent-1 floods agent-2's inbox: the bus queues no more than agent-1's
// share of agent-2's mailbox (protocol.MailPerSender) beyond what agent-2
// stores at agent-1's rate (INBOX_RATE), and refuses the rest, each with an
// answer; the operator's messages to agent-2 meanwhile are each delivered.
func TestHostileInboxFlood(t *testing.T) {
	f, a1, a2 := needTwo(t)
	// Untaken mail is never pruned: agent-2 takes agent-1's afterwards.
	t.Cleanup(func() { takeMailFrom(t, f, a2, a1) })
	cl := operatorClient(t)
	const flood = 8 * time.Second
	start := time.Now()
	done := probeAsync(a1, flood+2*time.Minute, "flood-inbox", "nats://bus:4222", protocol.ContainerCredsFile, a2, flood.String())
	time.Sleep(time.Second)
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := cl.Send(ctx, a2, protocol.Message{Body: fmt.Sprint("from the operator during the flood ", i)}, 5*time.Second)
		cancel()
		if err != nil || r.Status != protocol.ReceiptDelivered || r.File == "" {
			t.Errorf("operator's message %d to agent-2 during agent-1's flood: %+v %v; want delivered", i, r, err)
		}
	}
	r := <-done
	took := time.Since(start) // the messages reached agent-2 within this
	if r.err != nil || r.code != 0 {
		t.Fatalf("inbox flood probe: exit %d %v %q", r.code, r.err, r.out)
	}
	m := regexp.MustCompile(`sent (\d+) in \S+: (\d+) queued, (\d+) refused, (\d+) unanswered`).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("flood probe said %q", r.out)
	}
	sent, queued, refused := atoi(m[1]), atoi(m[2]), atoi(m[3])
	// agent-1's share of the mailbox, plus what agent-2 took out of it at
	// INBOX_RATE 20/s with bursts of 5x: at most 100 + 20 per second.
	if limit := protocol.MailPerSender + 100 + int(20*took.Seconds()); queued > limit {
		t.Errorf("the bus queued %d of agent-1's messages in %s: over its share and agent-2's rate (%d)", queued, took, limit)
	}
	if unanswered := sent - queued - refused; unanswered > 0 {
		t.Errorf("%d of agent-1's %d messages got no answer: lost in silence", unanswered, sent)
	}
	if refused == 0 {
		t.Errorf("agent-1's flood (%d messages) got no refusal: the bound was never reached", sent)
	}
	t.Logf("agent-1: %s", strings.TrimSpace(r.out))
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// agent-1, from inside its container with its own key, gives JetStream's
// answer to a pull of its own mailbox a reply subject of agent-2's
// (deleting its mailbox or task consumer through the JetStream API,
// writing into its task queue or ledger entry): the bus closes each such
// connection, and agent-2 keeps its mailbox and consumer and still runs
// its tasks.
func TestHostileReplySubjects(t *testing.T) {
	_, a1, a2 := needTwo(t)
	_, js, rs := jsResults(t)
	targets := []string{
		"$JS.API.STREAM.DELETE." + protocol.MailStream(a2),
		"$JS.API.CONSUMER.DELETE." + protocol.StreamTasks + "." + protocol.AgentConsumer(a2),
		protocol.TaskSubject(a2),
		"$KV." + protocol.LedgerBucket + "." + a2,
	}
	out := mustFail(t, a1, append([]string{"reply-redirect", "nats://bus:4222", protocol.ContainerCredsFile}, targets...)...)
	t.Logf("agent-1: %s", strings.TrimSpace(out))
	if n := strings.Count(out, `"closed":true`); n != len(targets) || strings.Count(out, "reply subject") != len(targets) {
		t.Errorf("%d of %d connections closed naming the reply subject: %s", n, len(targets), out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, protocol.MailStream(a2)); err != nil {
		t.Errorf("agent-2's mailbox: %v", err)
	}
	if _, err := js.Consumer(ctx, protocol.StreamTasks, protocol.AgentConsumer(a2)); err != nil {
		t.Errorf("agent-2's task consumer: %v", err)
	}
	after := taskID(t, "after-replies")
	publish(t, js, protocol.TaskSubject(a2), taskEcho(after, "still runs"))
	got := rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[after]) > 0 })
	if r := got[after][0]; r.Agent != a2 || !r.OK() || strings.TrimSpace(r.Stdout) != "still runs" {
		t.Errorf("agent-2's task after the attack: %+v", r)
	}
}
