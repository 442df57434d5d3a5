package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ai-flock/ai-flock/agent/metrics"
	"github.com/ai-flock/ai-flock/protocol"
)

var metricName = regexp.MustCompile(`\bflock_[a-z_]+\b`)

// family is the metric family a name in a query belongs to (a histogram's
// series carry _bucket, _sum or _count).
func family(name string, names []string) (string, bool) {
	if slices.Contains(names, name) {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(names, base) {
			return base, true
		}
	}
	return "", false
}

// Every query of the Grafana dashboard names metrics the exporter emits
// (a renamed series would leave a panel empty, silently), and the
// dashboard is one Grafana imports: unique panel IDs, a query each.
func TestTheDashboardQueriesWhatTheExporterEmits(t *testing.T) {
	raw, err := os.ReadFile("../../observability/grafana-flock.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("title %q, uid %q, %d panels", dash.Title, dash.UID, len(dash.Panels))
	}
	names := metrics.Names()
	if len(names) < 20 {
		t.Fatalf("the exporter names only %v", names)
	}
	ids, used := map[int]bool{}, map[string]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] || p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: duplicate ID, no title or no query", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, q := range p.Targets {
			found := metricName.FindAllString(q.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: query %q names no flock metric", p.Title, q.Expr)
			}
			for _, n := range found {
				fam, ok := family(n, names)
				if !ok {
					t.Errorf("panel %q: %s is not a metric the exporter emits (it emits %v)", p.Title, n, names)
				}
				used[fam] = true
			}
		}
	}
	t.Logf("the dashboard uses %d of the exporter's %d metric families", len(used), len(names))
}

// The scrape config in the repository scrapes the port the stack publishes.
func TestTheScrapeConfigTargetsTheRelay(t *testing.T) {
	raw, err := os.ReadFile("../../observability/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	want := "127.0.0.1:" + strconv.Itoa(protocol.MetricsPort)
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "flock" && sc.MetricsPath == "/metrics" && len(sc.StaticConfigs) == 1 && slices.Equal(sc.StaticConfigs[0].Targets, []string{want}) {
			return
		}
	}
	t.Fatalf("no job \"flock\" scraping %s/metrics: %+v", want, cfg.ScrapeConfigs)
}
