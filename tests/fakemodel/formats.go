package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The two APIs' bodies: messages, stream events and errors.

// answer is one reply, in whatever format.
type answer struct {
	model        string
	text         string
	usage        usage
	includeUsage bool
}

// format writes one API's bodies.
type format struct {
	message func(answer) []byte
	events  func(answer) []string
	error   func(w http.ResponseWriter, status int, typ, msg string)
}

var anthropic = format{message: anthropicMessage, events: anthropicEvents, error: anthropicError}
var openai = format{message: openaiMessage, events: openaiEvents, error: openaiError}

// chunks cuts text into the pieces a stream delivers (words, their spaces kept).
func chunks(text string) []string { return strings.SplitAfter(text, " ") }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and strings: cannot happen
	}
	return b
}

func sse(event string, data any) string {
	if event == "" {
		return "data: " + string(mustJSON(data)) + "\n\n"
	}
	return "event: " + event + "\ndata: " + string(mustJSON(data)) + "\n\n"
}

type obj = map[string]any

func anthropicUsage(u usage, out int64) obj {
	return obj{"input_tokens": u.in, "cache_creation_input_tokens": u.cacheWrite,
		"cache_read_input_tokens": u.cacheRead, "output_tokens": out}
}

func anthropicMessage(a answer) []byte {
	return mustJSON(obj{
		"id": "msg_fake01", "type": "message", "role": "assistant", "model": a.model,
		"content":     []obj{{"type": "text", "text": a.text}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": anthropicUsage(a.usage, a.usage.out),
	})
}

// anthropicEvents is the stream Anthropic sends: message_start with the
// input's usage, one text block of deltas (a ping after its start), the
// final output count in message_delta, message_stop.
func anthropicEvents(a answer) []string {
	ev := []string{
		sse("message_start", obj{"type": "message_start", "message": obj{
			"id": "msg_fake01", "type": "message", "role": "assistant", "model": a.model,
			"content": []obj{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": anthropicUsage(a.usage, 1),
		}}),
		sse("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}}),
		sse("ping", obj{"type": "ping"}),
	}
	for _, c := range chunks(a.text) {
		ev = append(ev, sse("content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "text_delta", "text": c}}))
	}
	return append(ev,
		sse("content_block_stop", obj{"type": "content_block_stop", "index": 0}),
		sse("message_delta", obj{"type": "message_delta",
			"delta": obj{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": obj{"output_tokens": a.usage.out}}),
		sse("message_stop", obj{"type": "message_stop"}),
	)
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(status)
	// A struct, not a map: the keys in Anthropic's order.
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	w.Write(mustJSON(struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, msg}}))
}

func openaiUsage(u usage) obj {
	return obj{"prompt_tokens": u.in, "completion_tokens": u.out, "total_tokens": u.in + u.out,
		"prompt_tokens_details":     obj{"cached_tokens": u.cacheRead, "audio_tokens": 0},
		"completion_tokens_details": obj{"reasoning_tokens": 0, "audio_tokens": 0}}
}

const created = 1735689600 // a fixed time: answers are reproducible

func openaiMessage(a answer) []byte {
	return mustJSON(obj{
		"id": "chatcmpl-fake01", "object": "chat.completion", "created": created, "model": a.model,
		"choices": []obj{{"index": 0, "message": obj{"role": "assistant", "content": a.text, "refusal": nil},
			"logprobs": nil, "finish_reason": "stop"}},
		"usage": openaiUsage(a.usage), "system_fingerprint": nil,
	})
}

// openaiEvents is a chat completion stream: a role chunk, content chunks, a
// finish chunk, with stream_options.include_usage a last chunk with no
// choices and the usage (every chunk before it has "usage": null), [DONE].
func openaiEvents(a answer) []string {
	chunk := func(choices []obj) obj {
		c := obj{"id": "chatcmpl-fake01", "object": "chat.completion.chunk", "created": created,
			"model": a.model, "system_fingerprint": nil, "choices": choices}
		if a.includeUsage {
			c["usage"] = nil
		}
		return c
	}
	choice := func(delta obj, finish any) []obj {
		return []obj{{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	ev := []string{sse("", chunk(choice(obj{"role": "assistant", "content": ""}, nil)))}
	for _, c := range chunks(a.text) {
		ev = append(ev, sse("", chunk(choice(obj{"content": c}, nil))))
	}
	ev = append(ev, sse("", chunk(choice(obj{}, "stop"))))
	if a.includeUsage {
		last := chunk([]obj{})
		last["usage"] = openaiUsage(a.usage)
		ev = append(ev, sse("", last))
	}
	return append(ev, "data: [DONE]\n\n")
}

func openaiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(mustJSON(obj{"error": obj{"message": msg, "type": typ, "param": nil, "code": nil}}))
}
