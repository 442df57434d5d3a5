package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ai-flock/ai-flock/protocol"
)

// CloudWatch's embedded metric format (EMF): on the aws stack the services
// write the same series as JSON log lines that CloudWatch Logs turns into
// metrics, instead of being scraped. Counters become what they counted
// since the last write; gauges their value; a histogram its count and sum
// since the last write.
//
// Limits of the format (AWS: "Specification: Embedded metric format"): at
// most 100 metrics in a document's directive, at most 30 dimensions in a
// dimension set; a document is one log event, at most 256 KiB (CloudWatch
// Logs' event size before its 2025 raise; kept as the bound). Names are
// at most 255 characters, a dimension value at most 1024.
const (
	EMFMaxMetrics    = 100
	EMFMaxDimensions = 30
	EMFMaxBytes      = 256 << 10
	emfMaxName       = 255
	emfMaxValue      = 1024
)

// EMF levels (flock:aws.metrics): protocol's.
const (
	EMFOff    = protocol.EMFOff
	EMFFlock  = protocol.EMFFlock
	EMFAgents = protocol.EMFAgents
)

// EMFLevels are the levels there are.
var EMFLevels = []string{EMFOff, EMFFlock, EMFAgents}

// EMFWriter writes the exporter's series as EMF documents.
type EMFWriter struct {
	e         *Exporter
	namespace string
	flock     string
	level     string

	mu   sync.Mutex
	last map[string]float64 // counters' and histograms' values at the last write, by series
}

// NewEMFWriter writes e's series under namespace, with the dimension
// Flock=flock on every metric.
func NewEMFWriter(e *Exporter, namespace, flock, level string) (*EMFWriter, error) {
	if !slices.Contains(EMFLevels[1:], level) {
		return nil, fmt.Errorf("metrics: EMF level %q: want one of %s", level, strings.Join(EMFLevels[1:], ", "))
	}
	if namespace == "" || len(namespace) > emfMaxName || flock == "" || len(flock) > emfMaxValue {
		return nil, fmt.Errorf("metrics: EMF namespace %q and flock %q: want 1-%d and 1-%d characters", namespace, flock, emfMaxName, emfMaxValue)
	}
	return &EMFWriter{e: e, namespace: namespace, flock: flock, level: level, last: map[string]float64{}}, nil
}

// emfSeries is one value under one set of dimensions.
type emfSeries struct {
	name, unit string
	dims       map[string]string
	value      float64
	max        bool // aggregated by the largest, not the sum
}

// Write gathers the series and writes them as EMF documents, one per line.
// The first write after a start sends counters' deltas from zero, as
// Prometheus takes a restart for a reset.
func (w *EMFWriter) Write(out io.Writer, now time.Time) error {
	mfs, err := w.e.reg.Gather()
	if err != nil && len(mfs) == 0 {
		return err
	}
	w.mu.Lock()
	series := w.series(mfs)
	w.mu.Unlock()
	if w.level == EMFFlock {
		series = aggregate(series)
	} else {
		// Every agent's own, and the flock's sums of them beside (what the
		// stack's dashboard shows at either level).
		var per []emfSeries
		for _, s := range series {
			if _, ok := s.dims["agent"]; ok {
				per = append(per, s)
			}
		}
		series = append(series, aggregate(per)...)
	}
	for _, doc := range documents(series, w.namespace, w.flock, now) {
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if len(b) > EMFMaxBytes {
			return fmt.Errorf("metrics: an EMF document of %d bytes, over %d", len(b), EMFMaxBytes)
		}
		if _, err := out.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// series flattens the families, counters and histograms as deltas.
func (w *EMFWriter) series(mfs []*dto.MetricFamily) []emfSeries {
	var out []emfSeries
	delta := func(key string, v float64) float64 {
		d := v - w.last[key]
		if d < 0 { // a reset
			d = v
		}
		w.last[key] = v
		return d
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			dims := map[string]string{}
			for _, l := range m.GetLabel() {
				dims[l.GetName()] = l.GetValue()
			}
			key := name + fmt.Sprint(m.GetLabel())
			unit := "None"
			if strings.HasSuffix(name, "_seconds") {
				unit = "Seconds"
			} else if strings.HasSuffix(name, "_bytes") {
				unit = "Bytes"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out = append(out, emfSeries{name: name, unit: "Count", dims: dims, value: delta(key, m.GetCounter().GetValue())})
			case dto.MetricType_GAUGE:
				out = append(out, emfSeries{name: name, unit: unit, dims: dims, value: m.GetGauge().GetValue(),
					max: strings.HasSuffix(name, "_age_seconds")})
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out = append(out,
					emfSeries{name: name + "_count", unit: "Count", dims: dims, value: delta(key+"_count", float64(h.GetSampleCount()))},
					emfSeries{name: name + "_sum", unit: unit, dims: dims, value: delta(key+"_sum", h.GetSampleSum())})
			}
		}
	}
	return out
}

// aggregate drops the agent dimension: per-agent series are summed (ages:
// the largest), and per-agent streams (mailboxes, results) counted as one.
func aggregate(in []emfSeries) []emfSeries {
	type k struct{ name, dims string }
	sums := map[k]*emfSeries{}
	var order []k
	for _, s := range in {
		dims := map[string]string{}
		for n, v := range s.dims {
			switch {
			case n == "agent":
				continue
			case n == "stream" && strings.HasPrefix(v, "FLOCK_MAIL_"):
				v = "FLOCK_MAIL_*"
			case n == "stream" && strings.HasPrefix(v, "FLOCK_RESULTS_"):
				v = "FLOCK_RESULTS_*"
			}
			dims[n] = v
		}
		key := k{s.name, dimsKey(dims)}
		a, ok := sums[key]
		if !ok {
			c := s
			c.dims = dims
			sums[key] = &c
			order = append(order, key)
			continue
		}
		if s.max {
			a.value = math.Max(a.value, s.value)
		} else {
			a.value += s.value
		}
	}
	out := make([]emfSeries, 0, len(order))
	for _, key := range order {
		out = append(out, *sums[key])
	}
	return out
}

func dimsKey(d map[string]string) string {
	keys := make([]string, 0, len(d))
	for n := range d {
		keys = append(keys, n)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, n := range keys {
		b.WriteString(n + "=" + d[n] + ",")
	}
	return b.String()
}

// documents groups series by their dimensions, at most EMFMaxMetrics each.
func documents(series []emfSeries, namespace, flock string, now time.Time) []map[string]any {
	groups := map[string][]emfSeries{}
	var order []string
	for _, s := range series {
		if math.IsNaN(s.value) || math.IsInf(s.value, 0) || len(s.name) > emfMaxName {
			continue
		}
		key := dimsKey(s.dims)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], s)
	}
	var docs []map[string]any
	for _, key := range order {
		g := groups[key]
		for len(g) > 0 {
			n := min(len(g), EMFMaxMetrics)
			docs = append(docs, document(g[:n], namespace, flock, now))
			g = g[n:]
		}
	}
	return docs
}

func document(series []emfSeries, namespace, flock string, now time.Time) map[string]any {
	doc := map[string]any{"Flock": flock}
	dimNames := []string{"Flock"}
	for n, v := range series[0].dims {
		if len(v) > emfMaxValue {
			v = v[:emfMaxValue]
		}
		doc[n] = v
		dimNames = append(dimNames, n)
	}
	slices.Sort(dimNames[1:])
	var defs []map[string]string
	for _, s := range series {
		doc[s.name] = s.value
		defs = append(defs, map[string]string{"Name": s.name, "Unit": s.unit})
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  namespace,
			"Dimensions": [][]string{dimNames},
			"Metrics":    defs,
		}},
	}
	return doc
}
