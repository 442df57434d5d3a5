package board_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The benchmarks run against a real bus (rendered config, permissions and
// topology, the board service inside it), on the real clock:
//
//	go test -run '^$' -bench . -benchtime 5x ./agent/board/

// benchBus starts a bus of n agents and connects the operator and every
// agent. Its board admits each agent's requests far past their default
// bounds (20 a second: 10 claims and completions): the benchmarks measure
// the board's own floor, agents claiming and completing as fast as they
// can, not the admission that keeps a flooding agent to its share.
func benchBus(b *testing.B, n int) (*board.Client, []*board.Client, *bustest.Bus) {
	b.Helper()
	f := bustest.Start(b, bustest.Agents(n), bustest.WithBoard(board.Options{AgentRate: 1e6, AgentInFlight: 1024}))
	op := board.NewOperatorClient(f.Connect(b, protocol.OperatorUser))
	clients := make([]*board.Client, n)
	for i := range clients {
		id := fmt.Sprintf("agent-%d", i+1)
		clients[i] = board.NewAgentClient(f.Connect(b, id), id)
	}
	return op, clients, f
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkClaim50Racers: 50 agents claim at once, for one ready task (one
// wins, 49 hear "nothing") or for 50 (each gets one, racing for the oldest
// first). An op is one round; claim latency is each agent's request, won
// or refused.
func BenchmarkClaim50Racers(b *testing.B) {
	op, clients, _ := benchBus(b, 50)
	ctx := context.Background()
	round := 0 // across runs: -count runs a sub-benchmark again on the same bus
	for _, tasks := range []int{1, 50} {
		b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
			var lat []time.Duration
			var mu sync.Mutex
			for b.Loop() {
				b.StopTimer()
				round++
				p := fmt.Sprintf("race-%d-%d", tasks, round)
				specs := make([]protocol.BoardTaskSpec, tasks)
				for i := range specs {
					specs[i] = protocol.BoardTaskSpec{ID: fmt.Sprintf("t%d", i), Run: []string{"true"}}
				}
				if _, err := op.Apply(ctx, protocol.BoardPlan{Plan: p, Tasks: specs}); err != nil {
					b.Fatal(err)
				}
				var (
					wg    sync.WaitGroup
					start = make(chan struct{})
					won   = make([]*protocol.BoardTask, len(clients))
				)
				for i, c := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						t0 := time.Now()
						rep, err := c.Claim(ctx, p, "", "")
						d := time.Since(t0)
						var be *protocol.BoardError
						switch {
						case err == nil:
							won[i] = rep.Task
						case !errors.As(err, &be) || be.Code != protocol.BoardErrNothing:
							b.Errorf("claim: %v", err)
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}()
				}
				b.StartTimer()
				close(start)
				wg.Wait()
				b.StopTimer()
				n := 0
				for i, w := range won {
					if w != nil {
						n++
						if _, err := clients[i].Complete(ctx, p, w.ID, protocol.BoardResult{}); err != nil {
							b.Fatal(err)
						}
					}
				}
				if n != tasks {
					b.Fatalf("round %d: %d winners for %d tasks", round, n, tasks)
				}
				b.StartTimer()
			}
			b.ReportMetric(us(quantile(lat, 0.5)), "claim-p50-µs")
			b.ReportMetric(us(quantile(lat, 0.99)), "claim-p99-µs")
		})
	}
}

// layeredPlan is width × depth no-op run tasks: task (d, i) needs (d-1, i)
// and (d-1, i+1 mod width), so each layer waits for the one above.
func layeredPlan(id string, width, depth int) protocol.BoardPlan {
	p := protocol.BoardPlan{Plan: id}
	name := func(d, i int) string { return fmt.Sprintf("d%02d-w%02d", d, i) }
	for d := range depth {
		for i := range width {
			s := protocol.BoardTaskSpec{ID: name(d, i), Run: []string{"true"}}
			if d > 0 {
				s.Needs = []string{name(d-1, i), name(d-1, (i+1)%width)}
			}
			p.Tasks = append(p.Tasks, s)
		}
	}
	return p
}

// floor is one claim→complete round trip with nothing else on the board:
// the least a task costs.
func floor(b *testing.B, op, c *board.Client, n int) time.Duration {
	ctx := context.Background()
	var d []time.Duration
	for i := range n {
		p := fmt.Sprintf("floor-%d-%d", time.Now().UnixNano(), i)
		if _, err := op.Apply(ctx, protocol.BoardPlan{Plan: p, Tasks: []protocol.BoardTaskSpec{{ID: "t", Run: []string{"true"}}}}); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := c.Claim(ctx, p, "", ""); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Complete(ctx, p, "t", protocol.BoardResult{}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	return quantile(d, 0.5)
}

// BenchmarkPlan1000: a plan of 1000 no-op tasks (width 50, depth 20) worked
// by 10 agents that claim and complete as fast as they can (claim limit 1:
// 10 slots), waiting for the ready bell when nothing is ready. An op is the
// whole plan, from the apply's reply to the last completion. Per-task
// overhead is a task's claim plus its complete; the makespan is compared
// with its lower bound, max(depth, ceil(tasks/slots)) × the floor (one
// uncontended claim→complete, measured in the same run). The bound counts
// latency only: the bus, the service and the agents share this process,
// so cpu-µs/task (the process's CPU time over the makespan, per task) and
// cores (that time over the makespan) say what the CPU allowed.
func BenchmarkPlan1000(b *testing.B) {
	const width, depth, slots = 50, 20, 10
	op, clients, f := benchBus(b, slots)
	fl := floor(b, op, clients[0], 50)
	bound := time.Duration(max(depth, (width*depth+slots-1)/slots)) * fl
	var (
		overhead  []time.Duration
		makespans []time.Duration
		applies   []time.Duration
		cpus      []time.Duration
	)
	// Each agent hears the ready bell on a connection of its own.
	bells := make([]chan struct{}, slots)
	for i := range bells {
		bell := make(chan struct{}, 1)
		bells[i] = bell
		nc := f.Connect(b, fmt.Sprintf("agent-%d", i+1))
		if _, err := nc.Subscribe(protocol.SubjectBoardReady, func(*nats.Msg) {
			select {
			case bell <- struct{}{}:
			default:
			}
		}); err != nil {
			b.Fatal(err)
		}
		_ = nc.Flush()
	}
	ctx := context.Background()
	run := 0
	for b.Loop() {
		b.StopTimer()
		run++
		p := layeredPlan(fmt.Sprintf("plan-%d", run), width, depth)
		t0 := time.Now()
		if _, err := op.Apply(ctx, p); err != nil {
			b.Fatal(err)
		}
		applies = append(applies, time.Since(t0))
		var (
			done atomic.Int64
			mu   sync.Mutex
			wg   sync.WaitGroup
		)
		b.StartTimer()
		cpu0 := cpuTime()
		start := time.Now()
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for done.Load() < int64(len(p.Tasks)) {
					t0 := time.Now()
					rep, err := c.Claim(ctx, p.Plan, "", "")
					var be *protocol.BoardError
					if errors.As(err, &be) && be.Code == protocol.BoardErrNothing {
						select {
						case <-bells[i]:
						case <-time.After(20 * time.Millisecond):
						}
						continue
					}
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := c.Complete(ctx, p.Plan, rep.Task.ID, protocol.BoardResult{}); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
					done.Add(1)
				}
				mu.Lock()
				overhead = append(overhead, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		makespans = append(makespans, time.Since(start))
		cpus = append(cpus, cpuTime()-cpu0)
		b.StopTimer()
		if n := done.Load(); n != int64(len(p.Tasks)) {
			b.Fatalf("%d of %d tasks done", n, len(p.Tasks))
		}
		b.StartTimer()
	}
	ms := quantile(makespans, 0.5)
	b.ReportMetric(us(quantile(overhead, 0.5)), "task-p50-µs")
	b.ReportMetric(us(quantile(overhead, 0.99)), "task-p99-µs")
	b.ReportMetric(us(fl), "floor-µs")
	b.ReportMetric(float64(ms)/float64(time.Millisecond), "makespan-ms")
	b.ReportMetric(float64(bound)/float64(time.Millisecond), "bound-ms")
	b.ReportMetric(float64(ms)/float64(bound), "makespan/bound")
	cpu := quantile(cpus, 0.5)
	b.ReportMetric(us(cpu)/float64(width*depth), "cpu-µs/task")
	b.ReportMetric(float64(cpu)/float64(ms), "cores")
	b.Logf("%d tasks (width %d, depth %d), %d slots (%d agents, claim limit 1), applied in %s (p50)\n"+
		"floor, one uncontended claim→complete  %9s\n"+
		"per-task claim+complete p50 / p99      %9s / %s\n"+
		"makespan (p50 of %d runs)               %9s\n"+
		"lower bound max(%d, %d) × floor        %9s\n"+
		"makespan / bound                       %9.2f\n"+
		"process CPU over the makespan (p50)    %9s (%.2f cores, %s a task)",
		width*depth, width, depth, slots, slots, quantile(applies, 0.5).Round(time.Millisecond),
		fl.Round(time.Microsecond),
		quantile(overhead, 0.5).Round(time.Microsecond), quantile(overhead, 0.99).Round(time.Microsecond),
		len(makespans), ms.Round(time.Millisecond),
		depth, (width*depth+slots-1)/slots, bound.Round(time.Millisecond),
		float64(ms)/float64(bound),
		cpu.Round(time.Millisecond), float64(cpu)/float64(ms), (cpu / time.Duration(width*depth)).Round(time.Microsecond))
}
