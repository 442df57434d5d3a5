package cli

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// auditCmd exports the audit trail as JSON lines, or verifies it.
func auditCmd(ctx context.Context, args []string, env Env, sio IO) int {
	if len(args) > 0 && args[0] == "verify" {
		return auditVerifyCmd(ctx, args[1:], env, sio)
	}
	o := newOperatorCmd("audit", env, sio)
	since := o.fs.String("since", "", "entries from then on: a duration back from now (90m, 24h) or an RFC 3339 time")
	agent := o.fs.String("agent", "", "entries done by or concerning this agent (or operator, gateway, bus, board, services)")
	kind := o.fs.String("kind", "", "entries of this kind: "+strings.Join(protocol.AuditKinds, ", "))
	if code, ok := o.parse(args); !ok {
		return code
	}
	if o.fs.NArg() != 0 {
		fmt.Fprintf(sio.Err, "flock-agent: audit: unexpected %q (flock-agent audit [--since T] [--agent ID] [--kind K] | audit verify [--anchor SEQ:HASH]...)\n", o.fs.Arg(0))
		return ExitUsage
	}
	f := audit.Filter{Agent: *agent, Kind: *kind}
	var err error
	if f.Since, err = parseSince(*since, time.Now()); err != nil {
		fmt.Fprintf(sio.Err, "flock-agent: audit: --since: %v\n", err)
		return ExitUsage
	}
	if f.Kind != "" && !slices.Contains(protocol.AuditKinds, f.Kind) {
		fmt.Fprintf(sio.Err, "flock-agent: audit: --kind: one of %s (got %q)\n", strings.Join(protocol.AuditKinds, ", "), f.Kind)
		return ExitUsage
	}
	own := []string{protocol.OperatorUser, protocol.GatewayUser, protocol.ServicesUser, "bus"}
	if f.Agent != "" && !slices.Contains(own, f.Agent) {
		if _, err := protocol.ParseAgentID(f.Agent); err != nil {
			fmt.Fprintf(sio.Err, "flock-agent: audit: --agent: %v\n", err)
			return ExitUsage
		}
	}
	return o.run(ctx, 5*time.Minute, func(ctx context.Context, cl *operator.Client) (int, error) {
		n := 0
		err := audit.Each(ctx, cl.JetStream(), f, func(_ uint64, raw []byte, _ protocol.AuditEntry) error {
			n++
			_, err := fmt.Fprintf(sio.Out, "%s\n", raw)
			return err
		})
		if err != nil {
			return ExitBus, err
		}
		if f.Agent != "" && !slices.Contains(own, f.Agent) {
			// An agent the flock no longer has keeps its history; one it
			// never had is a mistake worth saying.
			roster, rerr := cl.Roster(ctx)
			if rerr == nil && !slices.Contains(roster, f.Agent) {
				if n == 0 {
					fmt.Fprintf(sio.Err, "flock-agent: audit: --agent: %s is not an agent of the flock (%s) and no entry names it\n", f.Agent, strings.Join(roster, ", "))
					return ExitUnknownAgent, nil
				}
				fmt.Fprintf(sio.Err, "flock-agent: audit: %s is no longer an agent of the flock: its entries are from before\n", f.Agent)
			}
		}
		return ExitOK, nil
	})
}

// parseSince reads --since: a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("a duration back from now must be above 0 (got %q)", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a duration (90m, 24h) or an RFC 3339 time (2026-11-27T09:00:00Z), got %q", s)
	}
	if t.After(now) {
		return time.Time{}, fmt.Errorf("%s is in the future", s)
	}
	return t, nil
}

// anchorFlags collects --anchor SEQ:HASH.
type anchorFlags []protocol.AuditAnchor

func (a *anchorFlags) String() string { return "" }

func (a *anchorFlags) Set(v string) error {
	seq, hash, ok := strings.Cut(v, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if b, herr := hex.DecodeString(hash); !ok || err != nil || n == 0 || herr != nil || len(b) != 32 {
		return fmt.Errorf("want SEQ:HASH, an entry's sequence and its SHA-256 in hex, as the writer logs them (got %q)", v)
	}
	*a = append(*a, protocol.AuditAnchor{Seq: n, Hash: hash})
	return nil
}

// auditVerifyCmd checks the whole trail: exit 0 whole, 1 with problems
// (an edit, a deletion, a truncation) or gaps (entries it says it does not
// hold).
func auditVerifyCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("audit verify", env, sio)
	var anchors anchorFlags
	o.fs.Var(&anchors, "anchor", "a head the writer logged (\"audit head anchored\": seq and hash) or one you kept, as SEQ:HASH; repeatable")
	if code, ok := o.parse(args); !ok {
		return code
	}
	if o.fs.NArg() != 0 {
		fmt.Fprintf(sio.Err, "flock-agent: audit verify: unexpected %q\n", o.fs.Arg(0))
		return ExitUsage
	}
	return o.run(ctx, 10*time.Minute, func(ctx context.Context, cl *operator.Client) (int, error) {
		r, err := audit.Verify(ctx, cl.JetStream(), anchors...)
		if err != nil {
			return ExitBus, err
		}
		if o.c.json {
			printJSON(sio.Out, r)
		} else {
			printReport(sio, r)
		}
		if !r.OK() {
			return ExitTaskFailed, nil
		}
		return ExitOK, nil
	})
}

func printReport(sio IO, r audit.Report) {
	if r.Entries == 0 {
		fmt.Fprintln(sio.Out, "no entries")
	} else {
		fmt.Fprintf(sio.Out, "%d entries, %d to %d\n", r.Entries, r.First, r.Last)
	}
	if cp := r.Checkpoint; cp != nil {
		fmt.Fprintf(sio.Out, "retention removed entries 1 to %d (checkpoint %s, %s)\n", cp.Seq, cp.Hash, cp.Time.Format(time.RFC3339))
	}
	for _, a := range r.Anchors {
		fmt.Fprintf(sio.Out, "checked against the head anchored at entry %d (%s)\n", a.Seq, a.Hash)
	}
	if h := r.Head; h != nil {
		fmt.Fprintf(sio.Out, "head: entry %d, %s (keep it: audit verify --anchor %d:%s checks against it later)\n", h.Seq, h.Time.Format(time.RFC3339), h.Seq, h.Hash)
	}
	if len(r.Anchors) == 0 {
		fmt.Fprintln(sio.Out, "warning: no anchored head: entries cut off at the end would not show (give one with --anchor)")
	}
	switch {
	case r.Starts == 1:
		fmt.Fprintln(sio.Out, "the writer started once: what crossed the bus before it is not in the trail")
	case r.Starts > 1:
		fmt.Fprintf(sio.Out, "the writer started %d times: what crossed the bus while it was down is not in the trail\n", r.Starts)
	}
	if r.OK() {
		fmt.Fprintln(sio.Out, "ok: the trail is whole")
		return
	}
	for _, g := range r.Gaps {
		fmt.Fprintln(sio.Out, "not recorded:", g)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(sio.Out, "problem:", p)
	}
	if r.Intact() {
		fmt.Fprintf(sio.Out, "not whole: intact, but %d entries are not in it (above)\n", r.NotRecorded)
	}
}
