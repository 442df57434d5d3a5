package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ai-flock/ai-flock/agent/ledger"
)

// refuseBudget answers 429 for an agent whose budget is spent.
func refuseBudget(w http.ResponseWriter, agent string, adm ledger.Admission) {
	msg := fmt.Sprintf("agent %s has spent or reserved %d of its %d tokens", agent, adm.Used, adm.Limit)
	var reset string
	if !adm.Reset.IsZero() {
		reset = adm.Reset.UTC().Format(time.RFC3339)
		msg += "; its budget starts over at " + reset
	}
	writeError(w, http.StatusTooManyRequests, apiError{Type: "budget_exceeded", Budget: "tokens",
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
