package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// BenchmarkSmallJSONCall is one small non-streamed Anthropic call, straight to
// the fake upstream and through the gateway (metered, logged as JSON), in the
// same run: the difference is what the gateway costs a call. "gateway, no
// reservation" is the same call to an endpoint the gateway forwards free
// (the fake answers it alike): the gateway as it was before calls were read,
// bounded and reserved, so the difference with "gateway" is what metering
// and the reservation add.
func BenchmarkSmallJSONCall(b *testing.B) {
	tg := newTestGateway(b, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
		c.OnUsage = nil
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, bc := range []struct{ name, url string }{
		{"direct", tg.up.srv.URL + "/v1/messages"},
		{"gateway", tg.url + "/anthropic/v1/messages"},
		{"gateway, no reservation", tg.url + "/anthropic/v1/messages/count_tokens"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				req, _ := http.NewRequest("POST", bc.url, strings.NewReader(`{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Api-Key", dummyKey)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n == 0 {
					b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkMeteredThroughput is metered calls per second through one
// gateway, 32 of one agent at once, every one reserving against and settling
// into that agent's ledger (a budget it never reaches), beside the same
// calls to an endpoint forwarded free.
func BenchmarkMeteredThroughput(b *testing.B) {
	tg := newTestGateway(b, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
		c.OnUsage = nil
		c.Budgets = map[string]int64{"agent-1": 1 << 50}
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, bc := range []struct{ name, url string }{
		{"metered", tg.url + "/anthropic/v1/messages"},
		{"no reservation", tg.url + "/anthropic/v1/messages/count_tokens"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchCall(b, client, bc.url)
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// BenchmarkLedger is what keeping the ledger in the bus costs a metered
// call, against the same gateway with the ledger in its memory (what it was
// before) and against a call forwarded free, in one run: sequential calls
// (p50, p99) and 32 calls of one agent at once (calls/s), on a one-node and
// a three-node bus (replicated bucket: each write waits for a quorum).
//
//	go test -run '^$' -bench Ledger -benchtime 2000x ./agent/gateway
func BenchmarkLedger(b *testing.B) {
	one := bustest.Start(b, bustest.Agents(1))
	three := bustest.StartCluster(b, bustest.Agents(1))
	three.WaitReady(b, time.Minute)
	for _, lc := range []struct {
		name   string
		ledger func() ledger.Ledger
		path   string
	}{
		{"free (no reservation)", func() ledger.Ledger { return nil }, "/anthropic/v1/messages/count_tokens"},
		{"memory ledger", func() ledger.Ledger { return ledger.NewMemory() }, "/anthropic/v1/messages"},
		{"bus ledger, 1 node", func() ledger.Ledger { return busLedger(b, one) }, "/anthropic/v1/messages"},
		{"bus ledger, 3 nodes", func() ledger.Ledger { return busLedger(b, three) }, "/anthropic/v1/messages"},
	} {
		tg := newTestGateway(b, func(c *Config) {
			c.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
			c.OnUsage = nil
			c.Budgets = map[string]int64{"agent-1": 1 << 50}
			c.Ledger = lc.ledger()
		})
		url := tg.url + lc.path
		b.Run(lc.name+"/sequential", func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				benchCall(b, client, url)
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
		b.Run(lc.name+"/32 at once", func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					benchCall(b, client, url)
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

func busLedger(b *testing.B, f *bustest.Bus) ledger.Ledger {
	l, err := ledger.NewBus(f.Connect(b, protocol.GatewayUser), nil)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func benchCall(b *testing.B, client *http.Client, url string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Errorf("status %d", resp.StatusCode)
	}
}
