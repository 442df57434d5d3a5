package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// The spending ledger's contract: a JetStream key-value bucket the bus
// creates (Topology.KeyValues), one key per agent (its ID), written by the
// gateway with compare-and-set (every gateway, restarted or replicated,
// continues from the same totals) and by the operator's CLI (raise, reset).
// Agents have no permission on it.

// LedgerBucket is the bucket's name; its stream is "KV_" + LedgerBucket.
const LedgerBucket = "FLOCK_LEDGER"

// LedgerStream is the bucket's stream.
const LedgerStream = "KV_" + LedgerBucket

// LedgerBucketBytes is the store the bucket may use: one entry per agent
// and per agent and budgeted egress rule, each well under a KiB (about
// 350 bytes), one revision kept: some 2,900 entries.
const LedgerBucketBytes = 1 << 20

// EgressLedgerPrefix starts the keys of the egress rules' byte budgets in
// the ledger's bucket: egress.<agent>.<16 hex digits of the rule key's
// SHA-256>, each counting bytes as the others count tokens.
const EgressLedgerPrefix = "egress."

// EgressLedgerKey is the ledger entry of agent's bytes under the rule whose
// key is ruleKey ("github.com:443", "*.pythonhosted.org:443"): a key the
// bucket accepts whatever characters the host has. The gateway writes it;
// the operator's CLI computes it again to name the rule an entry is for.
func EgressLedgerKey(agent, ruleKey string) string {
	sum := sha256.Sum256([]byte(ruleKey))
	return EgressLedgerPrefix + agent + "." + hex.EncodeToString(sum[:8])
}

// LedgerPutSubjects is where the bucket's entries are written.
const LedgerPutSubjects = "$KV." + LedgerBucket + ".>"

// Budget windows (LedgerEntry.Window): a windowed budget starts over at the
// start of each UTC day or month.
const (
	WindowNone  = ""
	WindowDay   = "day"
	WindowMonth = "month"
)

// ValidWindow reports whether w names a budget window.
func ValidWindow(w string) bool { return w == WindowNone || w == WindowDay || w == WindowMonth }

// Period names the window that t falls in: "2026-11-26" (day), "2026-11"
// (month), "" (no window: one period for ever).
func Period(window string, t time.Time) string {
	t = t.UTC()
	switch window {
	case WindowDay:
		return t.Format("2006-01-02")
	case WindowMonth:
		return t.Format("2006-01")
	}
	return ""
}

// NextReset is when the window that t falls in ends (zero: never).
func NextReset(window string, t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	switch window {
	case WindowDay:
		return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
	case WindowMonth:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// LedgerEntry is one agent's spending in the current period: the value of
// its key in the bucket, as JSON.
type LedgerEntry struct {
	V     int    `json:"v"`
	Agent string `json:"agent"`
	// Window and Period: the entry counts the tokens of this period of this
	// window; a gateway that finds an older period starts the entry over.
	Window string `json:"window,omitempty"`
	Period string `json:"period,omitempty"`
	// Epoch goes up each time the entry starts over (a new period, an
	// operator's reset), so that a call reserved before then is charged
	// its cost in the new period, not a correction of a reservation the
	// new period never held.
	Epoch int64 `json:"epoch"`
	// Spent is what the agent's calls cost in the period, with the bounds
	// of its calls still in flight (reserved before they were forwarded).
	// A gateway that dies mid-call leaves that call's bound charged.
	Spent int64 `json:"spent"`
	// Budget is the configured budget as the gateway last applied it (0: no
	// cap); Raised is what the operator added for this period.
	Budget int64     `json:"budget,omitempty"`
	Raised int64     `json:"raised,omitempty"`
	Reset  time.Time `json:"reset,omitzero"` // when the period ends (zero: never)
	// Updated is when the entry was last written, and By which writer
	// ("gateway", "operator").
	Updated time.Time `json:"updated"`
	By      string    `json:"by,omitempty"`
}

// Limit is the tokens the agent may spend in the period: its budget and
// what the operator raised it by (0: no cap).
func (e LedgerEntry) Limit() int64 {
	if e.Budget <= 0 {
		return 0
	}
	return e.Budget + max(e.Raised, 0)
}

// Left is what the agent may still spend (0 when it has no cap, or none
// left).
func (e LedgerEntry) Left() int64 {
	if l := e.Limit(); l > e.Spent {
		return l - e.Spent
	}
	return 0
}

// Roll starts the entry over if now falls in another period of window than
// the one it counts (a new day or month, or a window the operator changed):
// nothing spent, nothing raised, a new epoch. It reports whether it did.
// An entry never written only takes the period.
func (e *LedgerEntry) Roll(window string, now time.Time) bool {
	p := Period(window, now)
	if e.Window == window && e.Period == p {
		return false
	}
	fresh := e.Window == WindowNone && e.Period == "" && e.Epoch == 0 && e.Spent == 0 && e.Raised == 0
	e.Window, e.Period, e.Reset = window, p, NextReset(window, now)
	if fresh {
		return false
	}
	e.Spent, e.Raised = 0, 0
	e.Epoch++
	return true
}

// ValidateLedgerKey checks that agent can be a key of the bucket.
func ValidateLedgerKey(agent string) error {
	_, err := ParseAgentID(agent)
	return err
}
