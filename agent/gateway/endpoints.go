package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

// API kinds: each fixes an upstream's allow-list of endpoints and how each
// is metered.
const (
	APIAnthropic = "anthropic"
	APIOpenAI    = "openai"
)

// DefaultMaxOutputTokens is the output cap the gateway writes into a
// metered request that names none, so that what the upstream may bill is
// what was reserved.
const DefaultMaxOutputTokens = 4096

// maxRequestBody bounds a metered request's body, which the gateway reads
// whole to find its output cap and tools (images and documents included).
const maxRequestBody = 12 << 20

// metering is how the gateway accounts for one endpoint.
type metering int

const (
	// metered: the response reports usage; the call reserves its bound
	// and is charged what the response says (the bound when it cannot be
	// read).
	metered metering = iota + 1
	// free: nothing is billed (token counting); forwarded, not charged.
	free
	// flat: outside the allow-list, priced by the operator: each call
	// reserves and costs its price, whatever it answers (an error, nothing).
	flat
)

// endpoint is one allowed method and path of an API kind.
type endpoint struct {
	method, path string
	meter        metering
	capField     string // the request's output-cap field; "" when the endpoint has no output
	streamUsage  bool   // a streamed call must ask for usage (Chat Completions' stream_options)
	price        int64  // flat: tokens per call
}

// endpoints are each API kind's allow-list. Everything else (batches,
// files, fine-tuning, model listings, images, legacy completions, unknown
// paths) is refused: its answers carry no usage the gateway reads, so
// forwarding it would give the agent the gateway's key for free.
var endpoints = map[string][]endpoint{
	APIAnthropic: {
		{method: http.MethodPost, path: "/v1/messages", meter: metered, capField: "max_tokens"},
		{method: http.MethodPost, path: "/v1/messages/count_tokens", meter: free},
	},
	APIOpenAI: {
		{method: http.MethodPost, path: "/v1/chat/completions", meter: metered, capField: "max_completion_tokens", streamUsage: true},
		{method: http.MethodPost, path: "/v1/responses", meter: metered, capField: "max_output_tokens"},
		{method: http.MethodPost, path: "/v1/embeddings", meter: metered},
		{method: http.MethodPost, path: "/v1/responses/input_tokens", meter: free},
	},
}

// endpointOf finds the endpoint a request calls on an upstream of kind api
// (or one the operator priced); upstreamPath is the path the upstream is
// asked for.
func endpointOf(api string, prices map[string]int64, method, upstreamPath string) (endpoint, bool) {
	p := path.Clean("/" + upstreamPath)
	for _, e := range endpoints[api] {
		if e.method == method && e.path == p {
			return e, true
		}
	}
	if price, ok := prices[method+" "+p]; ok {
		return endpoint{method: method, path: p, meter: flat, price: price}, true
	}
	return endpoint{}, false
}

// PriceKey is the rule for Upstream.Prices' keys.
var PriceKey = protocol.GatewayPriceKey

// prepared is a metered request after the gateway read it: the body to
// forward (changed only where the gateway wrote the output cap or asked for
// a stream's usage) and the call's bound in tokens.
type prepared struct {
	body  []byte
	bound int64
	tools int64    // the operator's price of the per-use tools it offers, in bound and cost
	notes []string // what the gateway changed, for the access log
	// The bound's parts: outCap output tokens for each of choices, and the
	// input estimate and tools (fixed). capWritten: outCap is the gateway's,
	// written in, so it may be lowered to fit what is left of a budget.
	outCap, choices, fixed int64
	capWritten             bool
}

// refusal is a request the gateway will not forward, with its answer.
type refusal struct {
	status int
	err    apiError
}

func (r *refusal) Error() string { return r.err.Message }

// prepare reads a metered request's body, refuses per-use tools and bodies
// it cannot bound, writes the default output cap where none is named, asks
// a Chat Completions stream for its usage, and computes the call's bound:
// its output cap plus an estimate of its input (estimateInput).
//
// Fields are found by their exact names, as the upstreams read them (Go's
// struct decoding would also take "MAX_TOKENS", which an upstream ignores).
// What the gateway writes in is spliced after the body's opening brace, so
// the body is not encoded again.
func prepare(e endpoint, raw []byte, defaultCap int64, prices map[string]int64) (*prepared, *refusal) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, &refusal{http.StatusBadRequest, apiError{Type: "invalid_request_error",
			Message: "a metered endpoint takes a JSON object: the gateway reads its output cap before forwarding it"}}
	}
	if what := connecting(req); what != "" {
		return nil, &refusal{http.StatusForbidden, apiError{Type: "tool_not_allowed",
			Message: fmt.Sprintf("%s has the upstream connect to a server the request names, a way out of the flock: the gateway does not forward it", what)}}
	}
	for _, f := range storedInputFields {
		if v, ok := req[f]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) && e.path == "/v1/responses" {
			return nil, &refusal{http.StatusBadRequest, apiError{Type: "invalid_request_error",
				Message: fmt.Sprintf("%s has the upstream read input it stores, which the gateway cannot bound against the budget: send the input in the request", f)}}
		}
	}
	tools, refused := billedTools(req, prices)
	if refused != "" {
		return nil, &refusal{http.StatusForbidden, apiError{Type: "tool_not_allowed",
			Message: fmt.Sprintf("tool %q is billed per use, which no token budget counts, and the operator has priced no %q: the gateway does not forward it", refused, "tool:"+billedPrefix(refused))}}
	}
	p := &prepared{tools: tools, choices: 1}
	var insert []string
	var outCap int64
	if e.capField != "" {
		var written bool
		outCap, written = outputCap(req, e.capField, defaultCap)
		p.capWritten = written
		if written {
			if _, present := req[e.capField]; present {
				// Named, but not a positive number: the upstream would refuse
				// it or take its own default; either way not forwarded so.
				return nil, &refusal{http.StatusBadRequest, apiError{Type: "invalid_request_error",
					Message: fmt.Sprintf("%s must be a positive integer: the gateway reserves it against the budget", e.capField)}}
			}
			insert = append(insert, fmt.Sprintf("%q:%d", e.capField, outCap))
			p.notes = append(p.notes, e.capField+" set to the gateway's default")
		}
	}
	rewrite := false
	if e.streamUsage && isTrue(req["stream"]) {
		var opts map[string]json.RawMessage
		_ = json.Unmarshal(req["stream_options"], &opts)
		switch {
		case isTrue(opts["include_usage"]):
		case req["stream_options"] == nil:
			insert = append(insert, `"stream_options":{"include_usage":true}`)
			p.notes = append(p.notes, "stream_options.include_usage set")
		default:
			if opts == nil {
				opts = map[string]json.RawMessage{}
			}
			opts["include_usage"] = json.RawMessage("true")
			req["stream_options"], _ = json.Marshal(opts)
			rewrite = true
			p.notes = append(p.notes, "stream_options.include_usage set")
		}
	}
	// Chat Completions' n choices each take up to the output cap.
	if v, ok := req["n"]; ok && e.path == "/v1/chat/completions" {
		var n int64
		if json.Unmarshal(v, &n) != nil || n < 1 || n > maxChoices {
			return nil, &refusal{http.StatusBadRequest, apiError{Type: "invalid_request_error",
				Message: fmt.Sprintf("n must be an integer from 1 to %d: the gateway reserves each choice's output against the budget", maxChoices)}}
		}
		p.choices = n
	}
	p.outCap, p.fixed = outCap, estimateInput(raw)+tools
	p.bound = outCap*p.choices + p.fixed
	switch {
	case rewrite:
		for _, kv := range insert {
			k, v, _ := strings.Cut(kv, ":")
			req[strings.Trim(k, `"`)] = json.RawMessage(v)
		}
		var err error
		if p.body, err = json.Marshal(req); err != nil {
			return nil, &refusal{http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "the request could not be re-encoded"}}
		}
	case len(insert) > 0:
		brace := bytes.IndexByte(raw, '{') // a JSON object: its first byte that is not space
		sep := ","
		if len(req) == 0 {
			sep = ""
		}
		p.body = make([]byte, 0, len(raw)+64)
		p.body = append(p.body, raw[:brace+1]...)
		p.body = append(p.body, strings.Join(insert, ",")+sep...)
		p.body = append(p.body, raw[brace+1:]...)
	default:
		p.body = raw
	}
	return p, nil
}

// readBody reads a metered request's body whole, at most maxRequestBody.
func readBody(body io.Reader) ([]byte, *refusal) {
	raw, err := io.ReadAll(io.LimitReader(body, maxRequestBody+1))
	if err != nil {
		return nil, &refusal{http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "the request body could not be read"}}
	}
	if len(raw) > maxRequestBody {
		return nil, &refusal{http.StatusRequestEntityTooLarge, apiError{Type: "request_too_large",
			Message: fmt.Sprintf("the gateway meters request bodies of at most %d MiB", maxRequestBody>>20)}}
	}
	return raw, nil
}

// outputCap is the request's output cap: the field the API names (for Chat
// Completions also the older max_tokens), or def, to be written into the
// request (true), when it names none that is a positive number.
func outputCap(req map[string]json.RawMessage, field string, def int64) (int64, bool) {
	fields := []string{field}
	if field == "max_completion_tokens" {
		fields = append(fields, "max_tokens")
	}
	for _, f := range fields {
		var n int64
		if v, ok := req[f]; ok && json.Unmarshal(v, &n) == nil && n > 0 {
			return n, false
		}
	}
	return def, true
}

func isTrue(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("true")) }

// Input estimate. Text costs about a token per 4 bytes in these APIs'
// tokenizers; the estimate takes 3, to err on the side of the budget. An
// image or document sent inline is base64, whose bytes are not its tokens:
// an image costs at most about 1,600 tokens (Anthropic bills width x height
// / 750 after scaling to 1.15 megapixels; OpenAI's high detail is of the same
// order), so each one counts imageTokens, however large; a PDF is billed per
// page as text plus an image, so its estimate is its decoded size / 3 (about
// what its pages' text and images cost), never its base64 / 3 x 4/3.
const (
	bytesPerToken = 3
	imageTokens   = 1600
	minInline     = 1 << 10 // strings shorter than this are never inline data
)

// estimateInput walks the request's JSON token by token (no copy of the
// whole is made): every string counts its length / 3, except inline data (a
// long base64 string under a "data" key, or a data: URL), which counts as an
// image or a document by its object's media_type.
func estimateInput(raw []byte) int64 {
	type frame struct {
		object    bool
		key       string // the key whose value comes next (objects)
		wantKey   bool
		mediaType string
		inline    []int64 // decoded sizes of "data" strings, priced when the object ends
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var stack []*frame
	var n int64
	value := func(f *frame) { // after a value in f: an object expects a key again
		if f != nil && f.object {
			f.wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, wantKey: true})
				n++
			case '[':
				key := ""
				if top != nil {
					key = top.key
				}
				stack = append(stack, &frame{key: key})
			case '}', ']':
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, size := range f.inline {
					n += inlineTokens(f.mediaType, size)
				}
				if len(stack) > 0 {
					value(stack[len(stack)-1])
				}
			}
		case string:
			if top != nil && top.object && top.wantKey {
				top.key, top.wantKey = t, false
				n++
				continue
			}
			key := ""
			if top != nil {
				key = top.key
			}
			switch {
			case top != nil && top.object && key == "media_type":
				top.mediaType = t
				n++
			case len(t) >= minInline && key == "data" && top != nil && top.object:
				top.inline = append(top.inline, int64(len(t))*3/4)
			case len(t) >= minInline && strings.HasPrefix(t, "data:"):
				mt, _, _ := strings.Cut(strings.TrimPrefix(t, "data:"), ";")
				n += inlineTokens(mt, int64(len(t))*3/4)
			default:
				n += int64(len(t))/bytesPerToken + 1
			}
			value(top)
		default:
			n++
			value(top)
		}
	}
	return n
}

// inlineTokens is the estimate of one inline item of the given media type
// and decoded size.
func inlineTokens(mediaType string, size int64) int64 {
	if strings.HasPrefix(mediaType, "image/") || mediaType == "" {
		return imageTokens
	}
	return size / bytesPerToken
}

// allowedOf says which endpoints a kind forwards, for the refusal.
func allowedOf(api string) string {
	var list []string
	for _, e := range endpoints[api] {
		list = append(list, e.method+" "+e.path)
	}
	if len(list) == 0 {
		return "this upstream's API kind is not known"
	}
	return "allowed are " + strings.Join(list, ", ")
}
