package metrics

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// descFields reads a Desc's name, help and variable labels from its String
// (the client has no getters).
var descFields = regexp.MustCompile(`fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)", constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}`)

// Reference is the table of every metric the exporter emits (name, type,
// labels, meaning), as docs/observability.md lists them.
func Reference() string {
	type row struct{ name, kind, labels, help string }
	var rows []row
	add := func(c prometheus.Collector, kind string) {
		ch := make(chan *prometheus.Desc, 32)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descFields.FindStringSubmatch(d.String())
			if m == nil {
				continue
			}
			labels := "—"
			if m[3] != "" {
				labels = "`" + strings.ReplaceAll(m[3], ",", "`, `") + "`"
			}
			rows = append(rows, row{m[1], kind, labels, strings.ReplaceAll(m[2], `\"`, `"`)})
		}
	}
	c := newCounters()
	for _, col := range c.collectors() {
		kind := "gauge"
		switch col.(type) {
		case *prometheus.CounterVec:
			kind = "counter"
		case *prometheus.HistogramVec:
			kind = "histogram"
		}
		add(col, kind)
	}
	add(&state{}, "gauge")
	var b strings.Builder
	b.WriteString("| metric | type | labels | what it counts |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.name, r.kind, r.labels, r.help)
	}
	return b.String()
}
