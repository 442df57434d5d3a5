package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
)

// Bounds on what the meter keeps while a response passes through. A body or
// a stream event beyond them is still sent whole; only its tokens go
// uncounted (and the access log says why).
const (
	maxMeteredJSON  = 8 << 20 // a JSON body is parsed once complete
	maxMeteredEvent = 8 << 20 // one SSE event (Responses' response.completed repeats the whole output)
	// maxTokens bounds one reported count: no call costs a trillion tokens,
	// and the few counts a usage sums stay far from overflowing an int64.
	maxTokens = 1 << 40
)

// meter reads the upstream's response body on its way to the agent and
// notes the usage it reports. It never holds bytes back: each Read returns
// what the upstream sent, parsed on the way (SSE line by line; JSON kept
// aside and parsed at the end).
type meter struct {
	body io.ReadCloser
	kind bodyKind

	mu      sync.Mutex
	json    []byte // kindJSON: the body so far
	line    []byte // kindSSE: the line being read
	data    []byte // kindSSE: the data lines of the event being read
	skip    bool   // kindSSE: the current line overflowed and is being skipped
	tally   tally
	problem string // why the tokens could not be counted, if they could not
	done    bool
	last    bool // kindSSE: the stream's last event was seen

	// Read's own, never shared: what it holds back, and whether the
	// answer's end was reported to onEnd.
	stream  bool // an event stream: nothing is held back
	held    byte
	holding bool
	ended   bool
	onEnd   func()
}

type bodyKind int

const (
	kindNone bodyKind = iota
	kindJSON
	kindSSE
)

// newMeter wraps body according to the response's headers. A compressed body
// is not metered: the gateway asks upstreams for plain or transport-decoded
// bodies, so one still encoded is an anomaly worth reporting.
func newMeter(h http.Header, body io.ReadCloser) *meter {
	m := &meter{body: body}
	if enc := h.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		m.problem = fmt.Sprintf("content-encoding %q", enc)
		return m
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		m.kind, m.stream = kindSSE, true
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		m.kind = kindJSON
	}
	return m
}

// Read passes the upstream's bytes on. The call is settled (onEnd) before
// the agent has the whole answer: a stream's at its last event (its
// usage complete), before that event is passed on; any other body's at its
// end, its last byte held back until then (a JSON answer is read whole, so
// one byte late costs its reader nothing, while a stream's events must not
// wait).
func (m *meter) Read(p []byte) (int, error) {
	if m.stream {
		n, err := m.body.Read(p)
		m.take(p[:n])
		m.mu.Lock()
		last := m.last
		m.mu.Unlock()
		if last || err == io.EOF {
			m.end()
		}
		return n, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	off := 0
	if m.holding {
		p[0], off, m.holding = m.held, 1, false
		if len(p) == 1 {
			return 1, nil
		}
	}
	n, err := m.body.Read(p[off:])
	m.take(p[off : off+n])
	n += off
	if err == nil && n > 0 {
		m.held, m.holding = p[n-1], true
		return n - 1, nil
	}
	if err == io.EOF {
		m.end()
	}
	return n, err
}

func (m *meter) take(p []byte) {
	if len(p) == 0 {
		return
	}
	m.mu.Lock()
	m.feed(p)
	m.mu.Unlock()
}

// end runs onEnd once the answer is complete (outside m.mu: it reads the
// result).
func (m *meter) end() {
	if m.ended {
		return
	}
	m.ended = true
	if m.onEnd != nil {
		m.onEnd()
	}
}

func (m *meter) Close() error { return m.body.Close() }

// result is the usage seen (ok false if none) and, if the tokens could not be
// counted, why. It may be called once the body is read or abandoned.
func (m *meter) result() (u Usage, ok bool, problem string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.done {
		m.done = true
		m.finish()
	}
	if !m.tally.found {
		return Usage{}, false, m.problem
	}
	return m.tally.usage(), true, m.problem
}

// clamped names the counts the upstream reported out of range and what it
// said ("output_tokens=-5"), "" if none; valid after result.
func (m *meter) clamped() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.tally.clamped, " ")
}

func (m *meter) feed(p []byte) {
	if m.done { // settled: what follows its end changes nothing
		return
	}
	switch m.kind {
	case kindJSON:
		if len(m.json)+len(p) > maxMeteredJSON {
			m.problem = fmt.Sprintf("JSON body over %d bytes", maxMeteredJSON)
			m.kind, m.json = kindNone, nil
			return
		}
		m.json = append(m.json, p...)
	case kindSSE:
		for len(p) > 0 {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				m.addToLine(p)
				return
			}
			m.addToLine(p[:i])
			m.endLine()
			p = p[i+1:]
		}
	}
}

func (m *meter) addToLine(p []byte) {
	if m.skip {
		return
	}
	if len(m.line)+len(p) > maxMeteredEvent {
		m.problem = fmt.Sprintf("an event over %d bytes", maxMeteredEvent)
		m.skip, m.line = true, nil
		return
	}
	m.line = append(m.line, p...)
}

// endLine handles one SSE line: data lines gather, a blank line ends the
// event; event:, id:, retry: and comments do not matter here (every format
// metered names its event type in the data as well).
func (m *meter) endLine() {
	line := bytes.TrimSuffix(m.line, []byte("\r"))
	skipped := m.skip
	m.line, m.skip = m.line[:0], false
	switch {
	case skipped:
		m.data = m.data[:0]
	case len(line) == 0:
		m.dispatch()
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
		if len(m.data) > 0 {
			m.data = append(m.data, '\n')
		}
		if len(m.data)+len(v) > maxMeteredEvent {
			m.problem = fmt.Sprintf("an event over %d bytes", maxMeteredEvent)
			m.data = m.data[:0]
			return
		}
		m.data = append(m.data, v...)
	}
}

func (m *meter) dispatch() {
	data := m.data
	m.data = m.data[:0]
	defer func() {
		if lastEvent(data) {
			m.last = true
		}
	}()
	// Only events that carry usage are decoded: the text deltas, the bulk of
	// a stream, are skipped by a substring test (inside a JSON string the
	// quotes would be escaped, so text cannot fake the key).
	if len(data) == 0 || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	if err := m.tally.addJSON(data); err != nil {
		m.problem = "malformed event: " + err.Error()
	}
}

func (m *meter) finish() {
	switch m.kind {
	case kindJSON:
		if len(bytes.TrimSpace(m.json)) == 0 {
			return
		}
		if err := m.tally.addJSON(m.json); err != nil {
			m.problem = "malformed JSON body: " + err.Error()
		}
		m.json = nil
	case kindSSE:
		// A stream cut short may end without its blank line.
		if len(m.line) > 0 {
			m.endLine()
		}
		m.dispatch()
	}
}

// lastEvents are the event types that end a stream, its usage complete:
// Anthropic's message_stop, Responses' response.completed, .incomplete and
// .failed (Chat Completions ends with data: [DONE]).
var lastEvents = map[string]bool{"message_stop": true, "response.completed": true, "response.incomplete": true, "response.failed": true}

// lastEvent says whether an event's data ends its stream. Only data naming
// one of lastEvents is decoded (escaped inside a JSON string, the quotes
// would not match).
func lastEvent(data []byte) bool {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		return true
	}
	named := false
	for t := range lastEvents {
		if bytes.Contains(data, []byte(`"`+t+`"`)) {
			named = true
			break
		}
	}
	if !named {
		return false
	}
	var e struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(data, &e) == nil && lastEvents[e.Type]
}
