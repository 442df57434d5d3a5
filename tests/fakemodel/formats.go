package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The APIs' bodies: messages, stream events and errors.

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
var responses = format{message: responsesMessage, events: responsesEvents, error: openaiError}

// formats are the paths the fake serves; a format without events is a
// token count (never streamed).
var formats = map[string]format{
	"/v1/messages":               anthropic,
	"/v1/messages/count_tokens":  {message: anthropicCount, error: anthropicError},
	"/v1/chat/completions":       openai,
	"/v1/responses":              responses,
	"/v1/responses/input_tokens": {message: responsesCount, error: openaiError},
}

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

// anthropicCount is count_tokens' answer: the input's tokens.
func anthropicCount(a answer) []byte { return mustJSON(obj{"input_tokens": a.usage.in}) }

// responsesCount is /v1/responses/input_tokens' answer.
func responsesCount(a answer) []byte {
	return mustJSON(obj{"object": "response.input_tokens", "input_tokens": a.usage.in})
}

func responsesUsage(u usage) obj {
	return obj{"input_tokens": u.in, "input_tokens_details": obj{"cached_tokens": u.cacheRead},
		"output_tokens": u.out, "output_tokens_details": obj{"reasoning_tokens": 0},
		"total_tokens": u.in + u.out}
}

// responsesOutput is the output list of a finished response: one message
// with one output_text part.
func responsesOutput(a answer, text string) []obj {
	return []obj{{"id": "msg_fake01", "type": "message", "status": "completed", "role": "assistant",
		"content": []obj{{"type": "output_text", "text": text, "annotations": []obj{}}}}}
}

// responsesObject is a response object: status in_progress has no output
// and null usage, completed has both.
func responsesObject(a answer, status string) obj {
	r := obj{"id": "resp_fake01", "object": "response", "created_at": created, "status": status,
		"model": a.model, "output": []obj{}, "usage": nil, "error": nil, "incomplete_details": nil}
	if status == "completed" {
		r["output"], r["usage"] = responsesOutput(a, a.text), responsesUsage(a.usage)
	}
	return r
}

func responsesMessage(a answer) []byte { return mustJSON(responsesObject(a, "completed")) }

// responsesEvents is a Responses stream: response.created and
// .in_progress, the message item and its text part opened, the text in
// deltas, everything closed again, response.completed with the usage. Each
// event is named in its event: line and its type, and numbered.
func responsesEvents(a answer) []string {
	var ev []string
	add := func(typ string, fields obj) {
		fields["type"], fields["sequence_number"] = typ, len(ev)
		ev = append(ev, sse(typ, fields))
	}
	item := obj{"id": "msg_fake01", "type": "message", "status": "in_progress", "role": "assistant", "content": []obj{}}
	part := obj{"type": "output_text", "text": "", "annotations": []obj{}}
	add("response.created", obj{"response": responsesObject(a, "in_progress")})
	add("response.in_progress", obj{"response": responsesObject(a, "in_progress")})
	add("response.output_item.added", obj{"output_index": 0, "item": item})
	add("response.content_part.added", obj{"item_id": "msg_fake01", "output_index": 0, "content_index": 0, "part": part})
	for _, c := range chunks(a.text) {
		add("response.output_text.delta", obj{"item_id": "msg_fake01", "output_index": 0, "content_index": 0, "delta": c})
	}
	done := responsesOutput(a, a.text)[0]
	add("response.output_text.done", obj{"item_id": "msg_fake01", "output_index": 0, "content_index": 0, "text": a.text})
	add("response.content_part.done", obj{"item_id": "msg_fake01", "output_index": 0, "content_index": 0, "part": done["content"].([]obj)[0]})
	add("response.output_item.done", obj{"output_index": 0, "item": done})
	add("response.completed", obj{"response": responsesObject(a, "completed")})
	return ev
}
