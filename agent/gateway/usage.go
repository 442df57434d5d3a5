package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// The usage objects of every metered format, read into one tally.

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
