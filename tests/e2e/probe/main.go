// Command probe runs inside a flock container during the e2e suite and
// reports what the container can and cannot do. It is copied into the agent's
// own directory by the test (the root filesystem is read-only), so the agent
// containers are replayed exactly as declared. Exit status: 0 = the action
// succeeded, 1 = it failed (the output says why), 2 = bad usage.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	// num and dur read argument i as a number and as a duration (0 when
	// it is neither).
	num := func(i int) int { n, _ := strconv.Atoi(arg(i)); return n }
	dur := func(i int) time.Duration { d, _ := time.ParseDuration(arg(i)); return d }
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
		printFile("/proc/net/route")
	case "write":
		p := arg(2)
		if err := os.WriteFile(p, []byte("probe\n"), 0o600); err != nil {
			fail(err)
		}
		os.Remove(p)
		ok("wrote " + p)
	case "log-flood":
		// A hostile agent floods the task's log by every way it can reach.
		logFlood(dur(2))
		return
	case "fill":
		// A hostile agent: write MiB into a file in its own directory.
		fill(arg(2), num(3), len(os.Args) > 4 && os.Args[4] == "last")
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
		printFile("/proc/version")
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
		time.Sleep(dur(2))
	case "hog":
		hog()
	case "burn":
		burn(arg(2))
	case "nats":
		natsProbe(arg(2), arg(3), arg(4))
	case "flood-results":
		// A hostile agent: fill its own results stream far past its share.
		floodResults(arg(2), arg(3), num(4), dur(5))
	case "flood-status":
		// A hostile agent: heartbeats and events on its own subjects, as
		// fast as it can, for a duration.
		floodStatus(arg(2), arg(3), dur(4))
	case "flood-inbox":
		// A hostile agent: messages to a peer's inbox as fast as it can,
		// each asking for a receipt, for a duration.
		floodInbox(arg(2), arg(3), arg(4), dur(5))
	case "mail-squat":
		// A hostile agent: a message carrying the operator's next message ID.
		mailSquat(arg(2), arg(3), arg(4), arg(5))
	case "mail-flood":
		// A hostile agent: messages to a peer as fast as the bus takes them,
		// small, or of the body size argument 6 names.
		size := 1
		if len(os.Args) > 6 {
			size = num(6)
		}
		mailFlood(arg(2), arg(3), arg(4), dur(5), size)
	case "flood-audit":
		// A hostile agent: results and messages whose IDs would make audit
		// entries past the trail's message size, as fast as it can.
		floodAudit(arg(2), arg(3), arg(4), dur(5))
	case "conns":
		// A hostile agent: open as many bus connections as it can with its
		// own key, and hold them.
		holdConns(arg(2), arg(3), num(4), dur(5))
	case "reply-redirect":
		// A hostile agent: JetStream's answers sent on reply subjects of
		// another agent's streams, or of the JetStream API (arg 4 on).
		replyRedirect(arg(2), arg(3), os.Args[4:])
	case "tcp-hold":
		// A hostile agent: open n idle TCP connections to an address and
		// hold them; say how many the other side kept open.
		holdTCP(arg(2), num(3), dur(4))
	case "hoard-pool":
		// A hostile agent: take as many pool tasks as it can, never run them.
		hoardPool(arg(2), arg(3), dur(4))
	case "forge-pool":
		// A hostile agent: claim pool tasks another agent is given, by
		// their sequence (guessed from arg 4 on, arg 5 of them).
		from, _ := strconv.ParseUint(arg(4), 10, 64)
		forgePool(arg(2), arg(3), from, num(5))
	case "board-claim":
		// An agent claims a board task (another agent's side of the
		// hostile board test: a task it holds); prints the claim's reply.
		boardClaim(arg(2), arg(3), arg(4), arg(5))
	case "board-get":
		// An agent gets an artifact of a task (a dependent's side of the
		// squatting test); prints it.
		boardGet(arg(2), arg(3), arg(4), arg(5), arg(6))
	case "board-squat":
		// A hostile agent holding a task of a plan: it takes the ID the
		// operator's next version will add, and another agent's
		// namespace, completes what it made with a forged result, and asks
		// about a task for another agent as about one that does not exist.
		boardSquat(arg(2), arg(3), arg(4), arg(5), arg(6), arg(7), arg(8))
	case "board-put":
		// An agent puts an artifact under a task it holds (the victim's
		// side of the hostile board test).
		boardPut(arg(2), arg(3), arg(4), arg(5), arg(6), arg(7))
	case "board-hostile":
		// A hostile agent at the board: what the board and the bus must
		// refuse its key (victim, other plan, own plan).
		boardHostile(arg(2), arg(3), arg(4), arg(5), arg(6))
	case "board-flood":
		// A hostile agent floods the board with list requests (plan and
		// task it may claim, for how long).
		boardFlood(arg(2), arg(3), arg(4), arg(5), dur(6))
	case "http":
		httpCall(arg(2), arg(3), len(os.Args) > 4 && os.Args[4] == "stream")
	case "get":
		// A GET as a stock Go tool does it: through the proxy the
		// environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
		get(arg(2))
	case "connect":
		connectVia(arg(2), arg(3))
	case "connect-flood":
		// A hostile agent: CONNECTs to names of its own choosing, a new one
		// each time, as fast as CONNS loops can: probe connect-flood PROXY CONNS SECONDS.
		connectFlood(arg(2), num(3), time.Duration(num(4))*time.Second)
	case "flood":
		flood(arg(2), arg(3), num(4), time.Duration(num(5))*time.Second)
	case "race":
		// A hostile agent: N streaming calls at once, as its budget runs out.
		race(arg(2), arg(3), num(4))
	case "call":
		// Any method, path and body through the gateway, as a stock SDK would
		// send them: probe call METHOD URL BODY.
		call(arg(2), arg(3), arg(4))
	case "latency":
		latency(arg(2), arg(3), num(4))
	case "mcp":
		// An agent program: start `/flock-agent mcp` on stdio, call one tool
		// with the JSON arguments given, print its structured output.
		mcpCall(arg(2), arg(3))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: probe dial|listen|udproute|routes|write|exists|read|id|setuid0|execfrom|fork|sleep|hog|burn|nats|board-claim|board-get|board-squat|board-hostile|board-flood|mcp|http|get|connect|flood|latency ...")
	os.Exit(2)
}

// printFile prints a file of the container's as it is.
func printFile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	fmt.Print(string(b))
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
