package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
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

// usageFields is the usage object of every format metered; absent fields stay
// nil, so a later event overwrites only what it reports.
type usageFields struct {
	InputTokens      *count        `json:"input_tokens"`                // Anthropic (uncached part), Responses (all)
	OutputTokens     *count        `json:"output_tokens"`               // Anthropic (cumulative in message_delta), Responses
	CacheRead        *count        `json:"cache_read_input_tokens"`     // Anthropic
	CacheCreation    *count        `json:"cache_creation_input_tokens"` // Anthropic
	PromptTokens     *count        `json:"prompt_tokens"`               // OpenAI chat (all)
	CompletionTokens *count        `json:"completion_tokens"`           // OpenAI chat
	PromptDetails    *cachedFields `json:"prompt_tokens_details"`       // OpenAI chat
	InputDetails     *cachedFields `json:"input_tokens_details"`        // Responses
}

type cachedFields struct {
	CachedTokens *count `json:"cached_tokens"`
}

// count is a token count as an upstream reports it: any JSON number, one out
// of int64's range saturated (tally then clamps it to [0, maxTokens]), so a
// broken upstream's numbers are charged, not a reason to skip the charge.
type count int64

var errNotCount = errors.New("a token count is not a number")

func (c *count) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		*c = count(i) // ParseInt saturates at MinInt64 and MaxInt64
		return nil
	}
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return errNotCount // a string, a bool, an object: never "Inf" or "0x1p3"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return errNotCount
	}
	switch {
	case f >= math.MaxInt64:
		*c = math.MaxInt64
	case f <= math.MinInt64:
		*c = math.MinInt64
	default:
		*c = count(f)
	}
	return nil
}

// envelope finds usage where each format puts it: at the top (JSON bodies,
// OpenAI chat chunks, Anthropic message_delta), in message (Anthropic
// message_start) or in response (Responses' response.completed).
type envelope struct {
	Usage    *usageFields    `json:"usage"`
	Message  json.RawMessage `json:"message"`
	Response json.RawMessage `json:"response"`
}

type tally struct {
	found                        bool
	input, output, cacheRead     int64
	cacheCreation, prompt, compl int64
	promptCached, inputCached    int64
	sawPrompt                    bool
	clamped                      []string // "field=value" of each count out of [0, maxTokens]
}

func (t *tally) addJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		if json.Valid(b) {
			return nil // valid JSON that is not an object carries no usage
		}
		return fmt.Errorf("not JSON")
	}
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	t.add(e.Usage)
	for _, inner := range []json.RawMessage{e.Message, e.Response} {
		if len(inner) == 0 || inner[0] != '{' {
			continue // absent, null, or (in an error body) a string
		}
		var in struct {
			Usage *usageFields `json:"usage"`
		}
		if err := json.Unmarshal(inner, &in); err != nil {
			return err
		}
		t.add(in.Usage)
	}
	return nil
}

func (t *tally) add(u *usageFields) {
	if u == nil {
		return
	}
	set := func(dst *int64, src *count, name string) {
		if src == nil {
			return
		}
		n := int64(*src)
		if n < 0 || n > maxTokens {
			if len(t.clamped) < 8 { // a stream may repeat them in every event
				t.clamped = append(t.clamped, name+"="+strconv.FormatInt(n, 10))
			}
			n = min(max(n, 0), maxTokens)
		}
		*dst = n
		t.found = true
	}
	set(&t.input, u.InputTokens, "input_tokens")
	set(&t.output, u.OutputTokens, "output_tokens")
	set(&t.cacheRead, u.CacheRead, "cache_read_input_tokens")
	set(&t.cacheCreation, u.CacheCreation, "cache_creation_input_tokens")
	set(&t.compl, u.CompletionTokens, "completion_tokens")
	if u.PromptTokens != nil {
		set(&t.prompt, u.PromptTokens, "prompt_tokens")
		t.sawPrompt = true
	}
	if u.PromptDetails != nil {
		set(&t.promptCached, u.PromptDetails.CachedTokens, "prompt_tokens_details.cached_tokens")
	}
	if u.InputDetails != nil {
		set(&t.inputCached, u.InputDetails.CachedTokens, "input_tokens_details.cached_tokens")
	}
}

func (t *tally) usage() Usage {
	var u Usage
	if t.sawPrompt { // OpenAI chat completions
		u.InputTokens = t.prompt
		u.OutputTokens = t.compl
		u.CacheReadTokens = t.promptCached
	} else { // Anthropic Messages or OpenAI Responses
		u.InputTokens = t.input + t.cacheCreation + t.cacheRead
		u.OutputTokens = t.output
		u.CacheReadTokens = t.cacheRead + t.inputCached
		u.CacheWriteTokens = t.cacheCreation
	}
	u.Total = u.InputTokens + u.OutputTokens
	return u
}
