package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
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
