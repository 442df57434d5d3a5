package bus

import (
	"context"
	"sort"

	"github.com/ai-flock/ai-flock/protocol"
)

// freeSlots is every agent's free slots as its consumer shows them.
type freeSlots struct {
	ready []*agentSlots // waiting for work (a pull is open): first choice
	quiet []*agentSlots // no pull open (starting, or gone): only when no ready agent is free
	size  map[string]int
	rr    int
}

type agentSlots struct {
	id   string
	free int
	size int
}

// credit gives agent id back a slot (up to its size).
func (f *freeSlots) credit(id string) {
	for _, l := range [][]*agentSlots{f.ready, f.quiet} {
		for _, a := range l {
			if a.id == id {
				a.free = min(a.free+1, a.size)
				return
			}
		}
	}
	if n := f.size[id]; n > 0 {
		f.ready = append(f.ready, &agentSlots{id: id, free: 1, size: n})
	}
}

func (f *freeSlots) total() int {
	n := 0
	for _, l := range [][]*agentSlots{f.ready, f.quiet} {
		for _, a := range l {
			n += a.free
		}
	}
	return n
}

// pick takes a slot: the ready agent with the most free slots (ties in
// turn), else a quiet one; never an agent in avoid while another is free.
func (f *freeSlots) pick(avoid map[string]bool) string {
	for _, pass := range []bool{true, false} {
		for _, l := range [][]*agentSlots{f.ready, f.quiet} {
			var best *agentSlots
			for i := range l {
				a := l[(i+f.rr)%len(l)]
				if a.free > 0 && (!pass || !avoid[a.id]) && (best == nil || a.free > best.free) {
					best = a
				}
			}
			if best != nil {
				best.free--
				f.rr++
				return best.id
			}
		}
	}
	return ""
}

// freeSlots reads every agent's consumer: slots minus the tasks it holds
// (delivered, not acked) minus those waiting for it (stored, not delivered).
// An agent with anything waiting gets nothing more.
func (s *Server) freeSlots(ctx context.Context) (*freeSlots, error) {
	slots := map[string]int{}
	for _, a := range s.Topology().Pool.Agents {
		slots[protocol.AgentConsumer(a.ID)] = a.Slots
	}
	stream, err := s.js.Stream(ctx, protocol.StreamTasks)
	if err != nil {
		return nil, err
	}
	f := &freeSlots{size: map[string]int{}}
	for _, a := range s.Topology().Pool.Agents {
		f.size[a.ID] = a.Slots
	}
	list := stream.ListConsumers(ctx)
	for info := range list.Info() {
		n, ok := slots[info.Name]
		if !ok || info.NumPending > 0 {
			continue
		}
		free := n - info.NumAckPending
		if free <= 0 {
			continue
		}
		a := &agentSlots{id: info.Name, free: free, size: n}
		if info.NumWaiting > 0 {
			f.ready = append(f.ready, a)
		} else {
			f.quiet = append(f.quiet, a)
		}
	}
	if err := list.Err(); err != nil {
		return nil, err
	}
	for _, l := range [][]*agentSlots{f.ready, f.quiet} {
		sort.Slice(l, func(i, j int) bool { return l[i].id < l[j].id })
	}
	return f, nil
}
