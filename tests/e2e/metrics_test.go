package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// needPrometheus is the path of the prometheus binary (Debian's package
// prometheus; tests/setup.sh installs it). Without it the test skips,
// unless FLOCK_REQUIRE_PROMETHEUS=1 (CI), which fails it.
func needPrometheus(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("FLOCK_REQUIRE_PROMETHEUS") == "1" {
			t.Fatal("prometheus is not installed and FLOCK_REQUIRE_PROMETHEUS=1: run tests/setup.sh")
		}
		t.Skip("prometheus is not installed (tests/setup.sh installs it)")
	}
	return p
}

// promServer is a real Prometheus scraping the flock with the repository's
// scrape config (observability/prometheus.yml), every second.
type promServer struct{ base string }

func startPrometheus(t *testing.T, bin string) *promServer {
	t.Helper()
	raw := readFile(t, filepath.Join(root, "observability", "prometheus.yml"))
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"}
	out, _ := yaml.Marshal(cfg)
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, out, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logFile, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	p := &promServer{base: "http://" + addr}
	testkit.WaitEvery(t, 30*time.Second, 100*time.Millisecond, "Prometheus to be ready", func() bool {
		res, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return p
}

// getJSON GETs path from the server's API and decodes its answer into v.
func (p *promServer) getJSON(t *testing.T, path string, v any) error {
	t.Helper()
	res, err := http.Get(p.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return json.NewDecoder(res.Body).Decode(v)
}

// query evaluates an instant query; it returns the single value, or
// ok=false when the result is empty.
func (p *promServer) query(t *testing.T, q string) (float64, bool) {
	t.Helper()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.getJSON(t, "/api/v1/query?query="+url.QueryEscape(q), &body); err != nil || body.Status != "success" {
		t.Fatalf("query %q: %v %s", q, err, body.Error)
	}
	switch len(body.Data.Result) {
	case 0:
		return 0, false
	case 1:
		v, err := strconv.ParseFloat(fmt.Sprint(body.Data.Result[0].Value[1]), 64)
		if err != nil {
			t.Fatalf("query %q: value %v", q, body.Data.Result[0].Value)
		}
		return v, true
	}
	t.Fatalf("query %q: %d series, want one", q, len(body.Data.Result))
	return 0, false
}

func (p *promServer) names(t *testing.T) []string {
	t.Helper()
	var body struct {
		Data []string `json:"data"`
	}
	if err := p.getJSON(t, "/api/v1/label/__name__/values", &body); err != nil {
		t.Fatal(err)
	}
	return body.Data
}

// A real Prometheus scrapes the flock through the bus's relay on the
// host's loopback, with the scrape config the repository ships, and its
// figures follow what the flock did: tasks run, a message taken, tokens
// spent through the fake model, each under the agent that did it; every
// metric the Grafana dashboard queries is among what it scraped.
func TestPrometheusScrapesTheFlock(t *testing.T) {
	skipUnderGVisor(t, gatewayFunction)
	bin := needPrometheus(t)
	f := needGateway(t)
	a1, a2 := f.agents[0], f.agents[1]
	p := startPrometheus(t, bin)
	testkit.WaitEvery(t, 30*time.Second, 100*time.Millisecond, "Prometheus to scrape the flock (up{job=\"flock\"} 1)", func() bool { v, ok := p.query(t, `up{job="flock"}`); return ok && v == 1 })

	tasksOK := fmt.Sprintf(`flock_tasks_total{agent=%q,status="ok"}`, a1)
	received := fmt.Sprintf(`flock_messages_received_total{agent=%q}`, a1)
	tokens := fmt.Sprintf(`flock_tokens_spent_total{agent=%q,upstream="anthropic"}`, a2)
	calls := fmt.Sprintf(`flock_gateway_calls_total{agent=%q,upstream="anthropic",status="200"}`, a2)
	before := map[string]float64{}
	for _, q := range []string{tasksOK, received, tokens, calls} {
		before[q], _ = p.query(t, q) // absent: nothing counted yet
	}

	nc, js, res := jsResults(t)
	var ids []string
	for i := range 3 {
		id := taskID(t, strconv.Itoa(i))
		ids = append(ids, id)
		publish(t, js, protocol.TaskSubject(a1), taskEcho(id, "counted"))
	}
	res.collect(t, 60*time.Second, func(got map[string][]protocol.Result) bool {
		for _, id := range ids {
			if len(got[id]) == 0 {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := operatorOn(t, nc).Send(ctx, a1, protocol.Message{Body: "counted"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if out := mustSucceed(t, a2, "http", messagesURL(t, a2), "claude-sonnet-4-5"); status(out) != "200" {
			t.Fatalf("model call: %q", out)
		}
	}

	want := map[string]float64{
		tasksOK:        before[tasksOK] + 3,
		received:       before[received] + 1,
		tokens:         before[tokens] + 2*(fakeIn+fakeOut),
		calls:          before[calls] + 2,
		`flock_bus_up`: 1,
		`sum(flock_agent_up) - on() flock_agents`: 0, // every agent heartbeats
	}
	var last string
	ok := testkit.Within(60*time.Second, 500*time.Millisecond, func() bool {
		for q, v := range want {
			got, present := p.query(t, q)
			if !present || got != v {
				last = fmt.Sprintf("%s = %g (present %v), want %g", q, got, present, v)
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("Prometheus never saw the flock's activity: %s", last)
	}
	if v, ok := p.query(t, fmt.Sprintf(`histogram_quantile(0.5, sum by (le) (flock_task_duration_seconds_bucket{agent=%q}))`, a1)); !ok || v <= 0 || v > 60 {
		t.Errorf("median task duration of %s: %g (present %v)", a1, v, ok)
	}

	// Every metric the dashboard queries was scraped, but the budget's:
	// those exist once an agent with a budget made a call since the
	// services started (agent/metrics proves them on a real bus).
	raw, err := os.ReadFile(filepath.Join(root, "observability", "grafana-flock.json"))
	if err != nil {
		t.Fatal(err)
	}
	scraped := p.names(t)
	for _, n := range slices.Compact(sortedMatches(regexp.MustCompile(`\bflock_[a-z_]+\b`), string(raw))) {
		if strings.HasPrefix(n, "flock_budget_") {
			continue
		}
		if !slices.Contains(scraped, n) {
			t.Errorf("the dashboard queries %s, which Prometheus never scraped (it has %v)", n, scraped)
		}
	}
}

func sortedMatches(re *regexp.Regexp, s string) []string {
	m := re.FindAllString(s, -1)
	slices.Sort(m)
	return m
}
