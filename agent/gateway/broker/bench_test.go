package broker

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	rules "github.com/ai-flock/ai-flock/protocol/egress"
)

// ways are the three ways to the same upstream, each on one kept-alive
// connection: straight to it, through a blind CONNECT tunnel (the agent's
// TLS spliced to the upstream), and brokered (the agent's TLS ended at the
// gateway, the rule checked, the credential put in, TLS again to the
// upstream).
type ways struct {
	direct, tunnel, brokered *http.Client
	directURL, url           func(path string) string
}

func benchWays(b *testing.B) ways {
	g := newRig(b, rules.Rule{Host: "example.com", PrivateRanges: []string{"127.0.0.0/8"}, Credential: &rules.Credential{Header: "Authorization", Prefix: "Bearer "}})
	// The tunnel: a rig of its own whose rule is a tunnel to the first
	// rig's upstream (its port), which the agent's TLS reaches itself.
	t := newRig(b, rules.Rule{Host: "example.com", Port: g.port(), PrivateRanges: []string{"127.0.0.0/8"}, Tunnel: true})
	pu, _ := url.Parse(t.proxy.URL)
	up := g.upstream.Client().Transport.(*http.Transport)
	tr := up.Clone()
	tr.Proxy = http.ProxyURL(pu)
	tr.TLSClientConfig = &tls.Config{RootCAs: up.TLSClientConfig.RootCAs, ServerName: "example.com"}
	return ways{
		direct: g.upstream.Client(), tunnel: &http.Client{Transport: tr}, brokered: g.client(),
		directURL: func(path string) string { return g.upstream.URL + path },
		url:       g.url,
	}
}

// BenchmarkEgressGET: a small GET each way, with its p50 and p99.
func BenchmarkEgressGET(b *testing.B) {
	w := benchWays(b)
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"direct", w.direct, w.directURL("/bench")},
		{"tunnel", w.tunnel, w.url("/bench")},
		{"brokered", w.brokered, w.url("/bench")},
	} {
		b.Run(c.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				get(b, c.client, c.url)
				took = append(took, time.Since(start))
			}
			reportPercentiles(b, took)
		})
	}
}

// BenchmarkEgressDownload: 100 MB through the tunnel and brokered, with
// the CPU the whole process (client, gateway and upstream alike) spent per
// MB: what the broker adds is the difference.
func BenchmarkEgressDownload(b *testing.B) {
	w := benchWays(b)
	const size = 100 << 20
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"tunnel", w.tunnel}, {"brokered", w.brokered}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			cpu0 := cpuTime()
			for b.Loop() {
				if n := get(b, c.client, w.url(fmt.Sprintf("/stream/%d", size))); n != size {
					b.Fatalf("read %d bytes, want %d", n, size)
				}
			}
			mb := float64(b.N) * size / (1 << 20)
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/mb, "cpu-ms/MB")
		})
	}
}

func get(b *testing.B, c *http.Client, url string) int64 {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return n
}

func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
