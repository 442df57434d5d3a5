// Command probe runs inside a flock container during the e2e suite and
// reports what the container can and cannot do. It is copied into the agent's
// own directory by the test (the root filesystem is read-only), so the agent
// containers are replayed exactly as declared. Exit status: 0 = the action
// succeeded, 1 = it failed (the output says why), 2 = bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	arg := func(i int) string {
		if len(os.Args) <= i {
			usage()
		}
		return os.Args[i]
	}
	switch os.Args[1] {
	case "dial":
		c, err := net.DialTimeout("tcp", arg(2), 3*time.Second)
		if err != nil {
			fail(err)
		}
		c.Close()
		ok("connected")
	case "listen":
		l, err := net.Listen("tcp", arg(2))
		if err != nil {
			fail(err)
		}
		for {
			c, err := l.Accept()
			if err == nil {
				c.Close()
			}
		}
	case "udproute":
		// A UDP connect only looks up a route: no packet leaves.
		c, err := net.Dial("udp", arg(2))
		if err != nil {
			fail(err)
		}
		c.Close()
		ok("a route exists")
	case "routes":
		b, err := os.ReadFile("/proc/net/route")
		if err != nil {
			fail(err)
		}
		fmt.Print(string(b))
	case "write":
		p := arg(2)
		if err := os.WriteFile(p, []byte("probe\n"), 0o600); err != nil {
			fail(err)
		}
		os.Remove(p)
		ok("wrote " + p)
	case "fill":
		// A hostile agent: write MiB into a file in its own directory.
		mib, _ := strconv.Atoi(arg(3))
		fill(arg(2), mib, len(os.Args) > 4 && os.Args[4] == "last")
	case "exists":
		if _, err := os.Lstat(arg(2)); err != nil {
			fail(err)
		}
		ok("exists")
	case "read":
		if _, err := os.ReadFile(arg(2)); err != nil {
			fail(err)
		}
		ok("read")
	case "kernel":
		// The kernel the agent sees: the host's, or gVisor's own.
		b, err := os.ReadFile("/proc/version")
		if err != nil {
			fail(err)
		}
		fmt.Print(string(b))
	case "id":
		status, _ := os.ReadFile("/proc/self/status")
		out := map[string]string{"uid": strconv.Itoa(os.Getuid()), "euid": strconv.Itoa(os.Geteuid()), "gid": strconv.Itoa(os.Getgid())}
		for _, line := range strings.Split(string(status), "\n") {
			for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp"} {
				if v, found := strings.CutPrefix(line, k+":"); found {
					out[k] = strings.TrimSpace(v)
				}
			}
		}
		json.NewEncoder(os.Stdout).Encode(out)
	case "setuid0":
		// Try to become root after exec of a setuid-root copy of this binary.
		if err := syscall.Setuid(0); err != nil {
			fail(fmt.Errorf("euid %d: setuid(0): %w", os.Geteuid(), err))
		}
		ok("became root")
	case "execfrom":
		// Copy this binary into a directory and try to run it there.
		self, _ := os.Executable()
		b, err := os.ReadFile(self)
		if err != nil {
			fail(err)
		}
		p := arg(2) + "/probe-copy"
		if err := os.WriteFile(p, b, 0o700); err != nil {
			fail(err)
		}
		defer os.Remove(p)
		if err := exec.Command(p, "id").Run(); err != nil {
			fmt.Println("FAIL", err)
			os.Remove(p)
			os.Exit(1)
		}
		os.Remove(p)
		ok("ran from " + arg(2))
	case "fork":
		forkLoop(arg(2))
	case "sleep":
		d, _ := time.ParseDuration(arg(2))
		time.Sleep(d)
	case "hog":
		hog()
	case "burn":
		burn(arg(2))
	case "nats":
		natsProbe(arg(2), arg(3), arg(4))
	case "flood-results":
		// A hostile agent: fill its own results stream far past its share.
		mib, _ := strconv.Atoi(arg(4))
		d, _ := time.ParseDuration(arg(5))
		floodResults(arg(2), arg(3), mib, d)
	case "flood-status":
		// A hostile agent: heartbeats and events on its own subjects, as
		// fast as it can, for a duration.
		d, _ := time.ParseDuration(arg(4))
		floodStatus(arg(2), arg(3), d)
	case "flood-inbox":
		// A hostile agent: messages to a peer's inbox as fast as it can,
		// each asking for a receipt, for a duration.
		d, _ := time.ParseDuration(arg(5))
		floodInbox(arg(2), arg(3), arg(4), d)
	case "conns":
		// A hostile agent: open as many bus connections as it can with its
		// own key, and hold them.
		n, _ := strconv.Atoi(arg(4))
		d, _ := time.ParseDuration(arg(5))
		holdConns(arg(2), arg(3), n, d)
	case "tcp-hold":
		// A hostile agent: open n idle TCP connections to an address and
		// hold them; say how many the other side kept open.
		n, _ := strconv.Atoi(arg(3))
		d, _ := time.ParseDuration(arg(4))
		holdTCP(arg(2), n, d)
	case "hoard-pool":
		// A hostile agent: take as many pool tasks as it can, never run them.
		d, _ := time.ParseDuration(arg(4))
		hoardPool(arg(2), arg(3), d)
	case "forge-pool":
		// A hostile agent: claim pool tasks another agent is given, by
		// their sequence (guessed from arg 4 on, arg 5 of them).
		from, _ := strconv.ParseUint(arg(4), 10, 64)
		n, _ := strconv.Atoi(arg(5))
		forgePool(arg(2), arg(3), from, n)
	case "http":
		httpCall(arg(2), arg(3), len(os.Args) > 4 && os.Args[4] == "stream")
	case "connect":
		connectVia(arg(2), arg(3))
	case "flood":
		n, _ := strconv.Atoi(arg(4))
		secs, _ := strconv.Atoi(arg(5))
		flood(arg(2), arg(3), n, time.Duration(secs)*time.Second)
	case "race":
		// A hostile agent: N streaming calls at once, as its budget runs out.
		n, _ := strconv.Atoi(arg(4))
		race(arg(2), arg(3), n)
	case "call":
		// Any method, path and body through the gateway, as a stock SDK would
		// send them: probe call METHOD URL BODY.
		call(arg(2), arg(3), arg(4))
	case "latency":
		n, _ := strconv.Atoi(arg(4))
		latency(arg(2), arg(3), n)
	case "mcp":
		// An agent program: start `/flock-agent mcp` on stdio, call one tool
		// with the JSON arguments given, print its structured output.
		mcpCall(arg(2), arg(3))
	default:
		usage()
	}
}

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
	stored, refused := 0, 0
	for timeout := time.After(20 * time.Second); stored+refused < sent; {
		select {
		case m := <-replies:
			if strings.Contains(string(m.Data), `"error"`) {
				refused++
			} else {
				stored++
			}
			continue
		case <-timeout:
		}
		break
	}
	ok(fmt.Sprintf("sent %d in %s: %d stored, %d refused, %d unanswered (the bus took %s more to read them)", sent, d, stored, refused, sent-stored-refused, waited.Round(time.Millisecond)))
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

// mcpCall is an agent program using its agent's MCP server, as an AI agent
// would: the server runs as a child with the task's environment.
func mcpCall(tool, args string) {
	var in map[string]any
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		fail(fmt.Errorf("arguments: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command("/flock-agent", "mcp")
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		fail(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: in})
	if err != nil {
		fail(err)
	}
	if res.IsError {
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				fmt.Println("FAIL", tc.Text)
			}
		}
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res.StructuredContent)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: probe dial|listen|udproute|routes|write|exists|read|id|setuid0|execfrom|fork|sleep|hog|burn|nats|mcp|http|connect|flood|latency ...")
	os.Exit(2)
}

// fill writes mib MiB of zeros to path, synced, and says how far it got.
// fill writes mib MiB of zeros to path in 1 MiB writes; with last, it then
// takes the filesystem's last bytes too, in ever smaller writes (under
// gVisor a file the host removes may keep its space while the sandbox
// holds it, so a probe of a directory leaves the slack the 1 MiB writes
// leave).
func fill(path string, mib int, last bool) {
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	buf := make([]byte, 1<<20)
	written := 0
	for i := 0; i < mib && err == nil; i++ {
		var n int
		n, err = f.Write(buf)
		written += n
	}
	// As a hostile agent would: the last bytes too, in ever smaller writes.
	for chunk := len(buf) / 2; last && err != nil && chunk > 0; chunk /= 2 {
		for {
			n, werr := f.Write(buf[:chunk])
			written += n
			if werr != nil {
				break
			}
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		fmt.Printf("wrote %d bytes\n", written)
		fail(err)
	}
	ok(fmt.Sprintf("wrote %d bytes", written))
}

func ok(msg string) { fmt.Println("OK", msg); os.Exit(0) }
func fail(err error) {
	fmt.Println("FAIL", err)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		fmt.Println("errno", int(errno))
	}
	os.Exit(1)
}

// forkLoop starts sleeping children until the kernel refuses, up to max,
// prints how many ran at once, then stops them.
func forkLoop(maxArg string) {
	max, _ := strconv.Atoi(maxArg)
	self, _ := os.Executable()
	var kids []*exec.Cmd
	var lastErr error
	for len(kids) < max {
		c := exec.Command(self, "sleep", "60s")
		if err := c.Start(); err != nil {
			lastErr = err
			break
		}
		kids = append(kids, c)
	}
	fmt.Printf("started %d\n", len(kids))
	if lastErr != nil {
		fmt.Printf("refused: %v\n", lastErr)
	}
	for _, c := range kids {
		c.Process.Kill()
		c.Wait()
	}
	if lastErr == nil {
		os.Exit(1) // never refused: no limit held
	}
	os.Exit(0)
}

// hog touches memory until the kernel kills it, reporting progress.
func hog() {
	var chunks [][]byte
	for i := 1; ; i++ {
		b := make([]byte, 8<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		chunks = append(chunks, b)
		fmt.Printf("allocated %d MiB\n", i*8)
		if i*8 >= 4096 {
			os.Exit(1) // 4 GiB and alive: no limit
		}
	}
}

// burn spins every CPU for a while and reports the CPU time it got.
func burn(secs string) {
	d, _ := time.ParseDuration(secs)
	var stop atomic.Bool
	n := runtime.NumCPU()
	for i := 0; i < n; i++ {
		go func() {
			x := 0
			for !stop.Load() {
				x++
			}
		}()
	}
	start := time.Now()
	time.Sleep(d)
	stop.Store(true)
	wall := time.Since(start)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	json.NewEncoder(os.Stdout).Encode(map[string]float64{"wall": wall.Seconds(), "cpu": cpu.Seconds(), "cpus": float64(n)})
}

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
	// A message whose reply subject is not a reply inbox (sent to itself
	// here, as a colluding peer would send it): answering it would publish
	// there in its name. An agent answers into reply inboxes only.
	mine, err := nc.SubscribeSync("agent." + self + ".inbox.*")
	if err != nil {
		fail(err)
	}
	for _, reply := range []string{"tasks." + other, "agent." + other + ".heartbeat", "$JS.API.STREAM.PURGE.FLOCK_TASKS", "$SYS.REQ.SERVER.PING"} {
		try("answer a message on "+reply, func() error {
			m := nats.NewMsg("agent." + self + ".inbox." + self)
			m.Reply, m.Data = reply, []byte(`{"v":1}`)
			if err := nc.PublishMsg(m); err != nil {
				return err
			}
			got, err := mine.NextMsg(2 * time.Second)
			if err != nil { // not a refusal: the probe cannot tell, so it fails
				fail(fmt.Errorf("the message to answer on %s did not arrive: %w", reply, err))
			}
			return got.Respond([]byte(`{"v":1,"id":"forged"}`))
		})
	}
	json.NewEncoder(os.Stdout).Encode(outcome)
}
