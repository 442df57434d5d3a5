package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ai-flock/ai-flock/agent/ledger"
)

// refuseBudget answers 429 for an agent whose budget is spent, or has less
// left than the call needs at least (least > 0: its input estimate and the
// smallest output cap the gateway fits in). A refusal that calls still in
// flight explain (their reservations, once settled at their cost, may leave
// room) is retryable: Retry-After, x-should-retry: true.
func refuseBudget(w http.ResponseWriter, agent string, adm ledger.Admission, least int64) {
	msg := fmt.Sprintf("agent %s has spent or reserved %d of its %d tokens", agent, adm.Used, adm.Limit)
	if least > 0 && adm.Used < adm.Limit {
		msg += fmt.Sprintf(": the %d left are fewer than the %d this call needs at least (its input and the smallest answer the gateway lets it ask for)", adm.Limit-adm.Used, least)
	}
	var reset string
	if !adm.Reset.IsZero() {
		reset = adm.Reset.UTC().Format(time.RFC3339)
		msg += "; its budget starts over at " + reset
	}
	left := adm.Limit - (adm.Used - adm.Pending) // once the calls in flight are settled, at most
	retry := adm.Pending > 0 && left > 0 && left >= least
	if retry {
		msg += fmt.Sprintf("; %d of them are reserved by its calls still in flight: retry once they end", adm.Pending)
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, http.StatusTooManyRequests, apiError{Type: "budget_exceeded", Budget: "tokens", retry: retry,
		Limit: &adm.Limit, Spent: &adm.Used, Agent: agent, Reset: reset, Message: msg})
}

// apiError is the body of every answer the gateway gives itself, in the
// shape SDKs already read: {"type":"error","error":{"type":…,"message":…}}.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Budget  string `json:"budget,omitempty"`
	Limit   *int64 `json:"limit,omitempty"`
	Spent   *int64 `json:"spent,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Reset   string `json:"reset,omitempty"` // when a windowed budget starts over (RFC 3339)
	Host    string `json:"host,omitempty"`
	retry   bool   // x-should-retry: true (it may pass), else false (it will not)
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// The Anthropic and OpenAI SDKs retry a 429 unless told not to; a spent
	// budget does not come back by retrying, a slot in flight does.
	h.Set("X-Should-Retry", strconv.FormatBool(e.retry))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Type  string   `json:"type"`
		Error apiError `json:"error"`
	}{"error", e})
}
