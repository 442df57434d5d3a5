package audit

import (
	"strings"
	"sync"

	"github.com/ai-flock/ai-flock/protocol"
)

// The writer's queue: entries derived as their messages crossed, waiting
// to be appended. It is bounded in bytes (the entries', which bound what
// they hold: the bodies they came from are not kept), in two lanes: the
// operator's and the services' own entries, taken first, and the agents'.
// In each lane a sender may hold at most its part (the lane split by the
// flock's agents, 64 KiB at least; the operator the whole of its lane), so
// that a sender flooding faster than the trail is written fills its own
// part and not the others'. An entry with no room is counted as missed.
type queue struct {
	mu        sync.Mutex
	lanes     [2]lane // own, agents'
	by        map[string]int
	agents    int
	ready     chan struct{} // signalled when entries wait
	queuedLen int
}

type lane struct {
	items []queued
	head  int
	bytes int
	max   int
}

// queued is an entry waiting for the writer, and the share it was charged
// to.
type queued struct {
	e      protocol.AuditEntry
	sender string
	size   int
}

// DefaultQueueBytes bounds the writer's queue: a third for the own lane,
// two for the agents'.
const DefaultQueueBytes = 6 << 20

// minSenderBytes is the least of a lane a sender may hold.
const minSenderBytes = 64 << 10

func newQueue(bytes, agents int) *queue {
	q := &queue{by: map[string]int{}, agents: max(agents, 1), ready: make(chan struct{}, 1)}
	q.lanes[0].max, q.lanes[1].max = bytes/3, bytes-bytes/3
	return q
}

func laneOf(sender string) int {
	if sender == protocol.OperatorUser || strings.HasPrefix(sender, servicesFor) {
		return 0
	}
	return 1
}

func (q *queue) setAgents(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.agents = max(n, 1)
}

// push queues it, or reports that its lane, or its sender's part of it,
// has no room.
func (q *queue) push(it queued) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := &q.lanes[laneOf(it.sender)]
	part := l.max
	if it.sender != protocol.OperatorUser {
		part = max(minSenderBytes, l.max/q.agents)
	}
	if l.bytes+it.size > l.max || q.by[it.sender]+it.size > part {
		return false
	}
	l.items = append(l.items, it)
	l.bytes += it.size
	q.by[it.sender] += it.size
	q.queuedLen++
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pop takes up to n entries, the own lane's first.
func (q *queue) pop(n int) []queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []queued
	for i := range q.lanes {
		l := &q.lanes[i]
		for l.head < len(l.items) && len(out) < n {
			it := l.items[l.head]
			l.items[l.head] = queued{}
			l.head++
			l.bytes -= it.size
			if q.by[it.sender] -= it.size; q.by[it.sender] <= 0 {
				delete(q.by, it.sender)
			}
			out = append(out, it)
		}
		if l.head == len(l.items) {
			l.items, l.head = l.items[:0], 0
		} else if l.head > len(l.items)/2 {
			l.items, l.head = append(l.items[:0], l.items[l.head:]...), 0
		}
	}
	q.queuedLen -= len(out)
	if q.queuedLen > 0 {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return out
}

// len is how many entries wait.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queuedLen
}
