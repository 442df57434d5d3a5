package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
	"github.com/ai-flock/ai-flock/protocol/egressca"
	"github.com/ai-flock/ai-flock/tests/bench"
)

// BenchmarkIdleRSS starts the built binary with 3 agents and one upstream
// (no bus), leaves it idle 2 s and reports its resident memory.
//
//	go test -run '^$' -bench IdleRSS -benchtime 1x ./agent/cmd/flock-gateway
func BenchmarkIdleRSS(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "flock-gateway")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	cfg := protocol.GatewayConfig{V: 1, Callers: protocol.CallersByNetwork,
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: "https://api.anthropic.com",
			KeyHeader: "x-api-key", KeyEnv: "ANTHROPIC_KEY"}}}
	for i := 1; i <= 3; i++ {
		cfg.Agents = append(cfg.Agents, protocol.GatewayAgent{ID: fmt.Sprintf("agent-%d", i),
			Network: fmt.Sprintf("10.210.%d.0/28", i), BudgetTokens: 1_000_000})
	}
	env := configEnv(b, cfg)
	var rss int64
	for b.Loop() {
		cmd := exec.Command(bin, "run")
		cmd.Env = []string{"ANTHROPIC_KEY=sk-bench"}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		n, err := bench.RSS(cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if werr := cmd.Wait(); err != nil || werr != nil || !strings.Contains(out.String(), `"msg":"listening"`) {
			b.Fatalf("rss %v, exit %v:\n%s", err, werr, out.String())
		}
		rss = n
	}
	b.ReportMetric(float64(rss), "rss-KiB")
}

// BenchmarkEgressRSS50Agents starts the built binary with 50 agents known
// by token and one brokered egress rule to a TLS upstream of the test's
// own, and reports its resident memory idle and then while the 50 agents
// each GET through the broker on connections of their own for 3 s
// (rss-KiB, loaded-rss-KiB, and what each agent adds: per-agent-KiB).
//
//	go test -run '^$' -bench EgressRSS50Agents -benchtime 1x ./agent/cmd/flock-gateway
func BenchmarkEgressRSS50Agents(b *testing.B) {
	const agents = 50
	dir := b.TempDir()
	bin := filepath.Join(dir, "flock-gateway")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	upCA, err := egressca.New(bytes.Repeat([]byte{9}, egressca.SeedSize), "upstream")
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := upCA.Leaf("localhost")
	if err != nil {
		b.Fatal(err)
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "from upstream") }))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	up.StartTLS()
	b.Cleanup(up.Close)
	port := up.Listener.Addr().(*net.TCPAddr).Port
	seed := bytes.Repeat([]byte{4}, egressca.SeedSize)
	cfg := protocol.GatewayConfig{V: 1, Flock: "bench", Callers: protocol.CallersByToken,
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: "https://api.anthropic.com", KeyHeader: "x-api-key", KeyEnv: "ANTHROPIC_KEY"}},
		Egress: &protocol.GatewayEgress{
			Rules:      []egress.Rule{{Host: "localhost", Port: port, PrivateRanges: []string{"127.0.0.0/8"}, Roots: upCA.PEM()}},
			CASeedFile: writeFile(b, dir, "egress.ca-seed", hex.EncodeToString(seed)),
		}}
	tokens := make([]string, agents)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("bench-token-%02d-%s", i+1, strings.Repeat("x", 32))
		sum := sha256.Sum256([]byte(tokens[i]))
		cfg.Agents = append(cfg.Agents, protocol.GatewayAgent{ID: fmt.Sprintf("agent-%d", i+1), TokenSHA256: hex.EncodeToString(sum[:])})
	}
	env := configEnv(b, cfg)
	flockCA, err := egressca.New(seed, "bench")
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(flockCA.Certificate())
	var idle, loaded int64
	for b.Loop() {
		cmd := exec.Command(bin, "run")
		cmd.Env = []string{"ANTHROPIC_KEY=sk-bench"}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		addr := ""
		for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, l := range logLines(out.String()) {
				if l["msg"] == "listening" {
					addr, _ = l["addr"].(string)
				}
			}
		}
		if addr == "" {
			_ = cmd.Process.Kill()
			b.Fatalf("not listening:\n%s", out.String())
		}
		time.Sleep(time.Second)
		if idle, err = bench.RSS(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		stop := time.Now().Add(3 * time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, agents)
		for _, tok := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				proxy, _ := url.Parse("http://agent:" + tok + "@" + addr)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: roots}}}
				defer c.CloseIdleConnections()
				for time.Now().Before(stop) {
					resp, err := c.Get(fmt.Sprintf("https://localhost:%d/x", port))
					if err != nil {
						errs <- err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						errs <- fmt.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			}()
		}
		// The resident memory with every agent's connection open.
		time.Sleep(2 * time.Second)
		loaded, err = bench.RSS(cmd.Process.Pid)
		wg.Wait()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		close(errs)
		for e := range errs {
			b.Fatalf("an agent's GET: %v\n%s", e, out.String())
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(idle), "rss-KiB")
	b.ReportMetric(float64(loaded), "loaded-rss-KiB")
	b.ReportMetric(float64(loaded-idle)/agents, "per-agent-KiB")
}
