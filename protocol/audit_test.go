package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

// Seal's one marshal gives the line json.Marshal would, and the hash Sum
// recomputes from it.
func TestAuditSealIsTheEntrysJSON(t *testing.T) {
	e := AuditEntry{Seq: 3, Time: time.Date(2026, 11, 27, 1, 2, 3, 4, time.UTC), Who: "agent-1", Kind: AuditTaskResult, What: `t"1`, Outcome: "ok", Prev: "ab"}
	line := e.Seal()
	want, _ := json.Marshal(e)
	if string(line) != string(want) {
		t.Fatalf("sealed line\n%s\nwant\n%s", line, want)
	}
	var back AuditEntry
	if err := json.Unmarshal(line, &back); err != nil || back.Sum() != back.Hash || back.Hash == "" {
		t.Fatalf("the line does not hash to its hash: %v %+v", err, back)
	}
}
