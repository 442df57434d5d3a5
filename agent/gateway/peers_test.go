package gateway_test

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// One peer holds at most its share of connections, idle or not: the next
// gets a 429 and is closed, loopback is not counted, and a connection
// closed makes room again.
func TestPeerListenerBoundsEachPeer(t *testing.T) {
	raw, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	const share = 3
	ln := gateway.LimitPeers(raw, share, nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(raw.Addr().String())
	ip := testkit.LocalIPv4(t)
	addr := net.JoinHostPort(ip, port)
	get := func(c net.Conn) (string, error) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: gw\r\n\r\n")); err != nil {
			return "", err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line), err
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < share; i++ { // idle: a TCP connection and nothing sent
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	peer := netip.MustParseAddr(ip)
	deadline := time.Now().Add(5 * time.Second)
	for ln.Held(peer) < share && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := ln.Held(peer); n != share {
		t.Fatalf("the peer holds %d connections, want %d", n, share)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := get(over); !strings.Contains(status, "429") {
		t.Errorf("connection %d of a share of %d: %q, want 429", share+1, share, status)
	}
	over.Close()
	if n := ln.Held(peer); n != share {
		t.Errorf("after the refusal the peer holds %d, want %d", n, share)
	}
	// Loopback (the health check, a test) is not counted.
	lo, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatal(err)
	}
	if status, err := get(lo); !strings.Contains(status, "200") {
		t.Errorf("loopback while the peer holds its share: %q %v", status, err)
	}
	lo.Close()
	// A connection closed is room for the next.
	held[0].Close()
	held = held[1:]
	deadline = time.Now().Add(5 * time.Second)
	for ln.Held(peer) >= share && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	next, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if status, err := get(next); !strings.Contains(status, "200") {
		t.Errorf("after one closed: %q %v, want 200", status, err)
	}
}
