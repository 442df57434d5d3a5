package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
)

// egressCmd shows each agent's way out from the audit trail: the hosts it
// reached or tried, with connections, requests, refusals and bytes, and
// its recent refusals; then the rules' byte budgets from the ledger, each
// named by the rule it is for; --suggest prints the rules that would have allowed
// them, for the operator to review and paste into flock:gateway.egress
// (nothing is allowed by itself).
func egressCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("egress", env, sio)
	since := o.fs.String("since", "24h", "entries from then on: a duration back from now (90m, 24h) or an RFC 3339 time")
	agent := o.fs.String("agent", "", "this agent's only")
	suggest := o.fs.Bool("suggest", false, "print the rules that would have allowed the refused requests (JSON, one per line), and nothing else")
	if code, ok := o.parse(args); !ok {
		return code
	}
	if o.fs.NArg() != 0 {
		fmt.Fprintf(sio.Err, "flock-agent: egress: unexpected %q (flock-agent egress [--since T] [--agent ID] [--suggest])\n", o.fs.Arg(0))
		return ExitUsage
	}
	f := audit.Filter{Agent: *agent, Kind: protocol.AuditEgress}
	var err error
	if f.Since, err = parseSince(*since, time.Now()); err != nil {
		fmt.Fprintf(sio.Err, "flock-agent: egress: --since: %v\n", err)
		return ExitUsage
	}
	if f.Agent != "" {
		if _, err := protocol.ParseAgentID(f.Agent); err != nil {
			fmt.Fprintf(sio.Err, "flock-agent: egress: --agent: %v\n", err)
			return ExitUsage
		}
	}
	return o.run(ctx, 5*time.Minute, func(ctx context.Context, cl *operator.Client) (int, error) {
		var use egressUse
		err := audit.Each(ctx, cl.JetStream(), f, func(_ uint64, _ []byte, e protocol.AuditEntry) error {
			use.add(e)
			return nil
		})
		if err != nil {
			return ExitBus, err
		}
		if !*suggest {
			budgets, err := cl.EgressBudgets(ctx)
			if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
				return ExitBus, err
			}
			use.addBudgets(budgets, *agent)
		}
		if *suggest {
			for _, r := range use.suggestions() {
				b, _ := json.Marshal(r)
				fmt.Fprintf(sio.Out, "%s\n", b)
			}
			return ExitOK, nil
		}
		if o.c.json {
			return ExitOK, json.NewEncoder(sio.Out).Encode(use)
		}
		use.print(sio)
		return ExitOK, nil
	})
}

// maxRefusalsShown bounds the refusals kept per agent and host.
const maxRefusalsShown = 5

// egressRow is one agent's use of one host.
type egressRow struct {
	Agent       string    `json:"agent"`
	Host        string    `json:"host"`
	Connections int64     `json:"connections"`
	Requests    int64     `json:"requests"`
	Refused     int64     `json:"refused"`
	Sent        int64     `json:"sent"`
	Received    int64     `json:"received"`
	Last        time.Time `json:"last"`
	Refusals    []string  `json:"refusals,omitempty"` // the newest first: "METHOD /path"
}

type egressUse struct {
	rows    []*egressRow
	budgets []egressBudget
}

// egressBudget is one agent's ledger entry under one rule's byte budget.
type egressBudget struct {
	Agent string `json:"agent"`
	// Rule is the rule's key (host:port), found among the hosts the agent
	// used in the period and the *. rules above them; a rule the agent
	// used only before it is named by its ledger key instead.
	Rule   string    `json:"rule"`
	Window string    `json:"window,omitempty"`
	Spent  int64     `json:"spent"`
	Limit  int64     `json:"limit"`
	Reset  time.Time `json:"reset,omitzero"`
}

// MarshalJSON: the hosts and the budgets, as --json prints them.
func (u egressUse) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Hosts   []*egressRow   `json:"hosts"`
		Budgets []egressBudget `json:"budgets"`
	}{append([]*egressRow{}, u.rows...), append([]egressBudget{}, u.budgets...)})
}

// addBudgets names each egress ledger entry (of agent only, when set) by
// its rule: the key is a hash of the rule's key, so it is computed again
// for each host the agent used and each *. suffix above it.
func (u *egressUse) addBudgets(entries []protocol.LedgerEntry, agent string) {
	for _, e := range entries {
		rest := strings.TrimPrefix(e.Agent, protocol.EgressLedgerPrefix)
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			continue
		}
		who := rest[:i]
		if agent != "" && who != agent {
			continue
		}
		b := egressBudget{Agent: who, Rule: e.Agent, Window: e.Window, Spent: e.Spent, Limit: e.Limit(), Reset: e.Reset}
		if key, ok := u.ruleOf(who, e.Agent); ok {
			b.Rule = key
		}
		u.budgets = append(u.budgets, b)
	}
}

// ruleOf finds the rule key whose ledger key for agent is ledgerKey.
func (u *egressUse) ruleOf(agent, ledgerKey string) (string, bool) {
	for _, r := range u.rows {
		if r.Agent != agent {
			continue
		}
		host, port, err := net.SplitHostPort(r.Host)
		if err != nil {
			continue
		}
		keys := []string{host}
		for rest := host; strings.Contains(rest, "."); {
			_, rest, _ = strings.Cut(rest, ".")
			keys = append(keys, "*."+rest)
		}
		for _, k := range keys {
			if key := net.JoinHostPort(k, port); protocol.EgressLedgerKey(agent, key) == ledgerKey {
				return key, true
			}
		}
	}
	return "", false
}

func (u *egressUse) add(e protocol.AuditEntry) {
	i := slices.IndexFunc(u.rows, func(r *egressRow) bool { return r.Agent == e.Agent && r.Host == e.What })
	if i < 0 {
		u.rows = append(u.rows, &egressRow{Agent: e.Agent, Host: e.What})
		i = len(u.rows) - 1
	}
	r := u.rows[i]
	r.Connections++
	r.Requests += e.Requests
	r.Refused += e.Refused
	r.Sent += e.Sent
	r.Received += e.Received
	r.Last = e.Time
	if e.Refusal != "" && protocol.ValidEgressRefusal(e.Refusal) && !slices.Contains(r.Refusals, e.Refusal) {
		r.Refusals = append([]string{e.Refusal}, r.Refusals...)
		r.Refusals = r.Refusals[:min(len(r.Refusals), maxRefusalsShown)]
	}
}

func (u *egressUse) print(sio IO) {
	if len(u.rows) == 0 {
		fmt.Fprintln(sio.Out, "no egress in the trail for this period")
		u.printBudgets(sio)
		return
	}
	slices.SortFunc(u.rows, func(a, b *egressRow) int { return strings.Compare(a.Agent+" "+a.Host, b.Agent+" "+b.Host) })
	tw := tabwriter.NewWriter(sio.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tHOST\tCONNECTIONS\tREQUESTS\tREFUSED\tSENT\tRECEIVED\tLAST")
	for _, r := range u.rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Agent, r.Host, r.Connections, r.Requests, r.Refused, r.Sent, r.Received, r.Last.Format(time.RFC3339))
	}
	tw.Flush()
	for _, r := range u.rows {
		for _, ref := range r.Refusals {
			fmt.Fprintf(sio.Out, "refused: %s %s %s\n", r.Agent, r.Host, ref)
		}
	}
	u.printBudgets(sio)
}

func (u *egressUse) printBudgets(sio IO) {
	for _, b := range u.budgets {
		until := "no end"
		if !b.Reset.IsZero() {
			until = "until " + b.Reset.Format(time.RFC3339)
		}
		fmt.Fprintf(sio.Out, "budget: %s %s: %d of %d bytes (%s, %s)\n", b.Agent, b.Rule, b.Spent, b.Limit, cmp.Or(b.Window, "none"), until)
	}
}

// suggestions are the rules that would have allowed the refusals, each once.
func (u *egressUse) suggestions() []egress.Rule {
	var out []egress.Rule
	seen := map[string]bool{}
	for _, r := range u.rows {
		host, p, err := net.SplitHostPort(r.Host)
		port, perr := strconv.Atoi(p)
		if err != nil || perr != nil {
			continue
		}
		for _, ref := range r.Refusals {
			method, path, _ := strings.Cut(ref, " ")
			if method == "CONNECT" {
				method, path = "GET", "/"
			}
			s := egress.Suggest(r.Agent, host, port, method, path)
			b, _ := json.Marshal(s)
			if !seen[string(b)] {
				seen[string(b)] = true
				out = append(out, s)
			}
		}
	}
	return out
}
