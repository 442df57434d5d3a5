package protocol

import (
	"strconv"
	"strings"
)

// The pool. The operator sends a pool task to tasks.pool; no agent pulls from
// there. The bus hands each pool task to one agent with a free slot by
// storing a copy on tasks.pool.<id>, which that agent's own consumer
// delivers (so the server bounds what it holds by its slots, MaxAckPending),
// and takes the copy back (deletes it and queues the task again) when the
// agent has not answered within the task's timeout and the pool's grace.
// The copy's headers say which pool task it is, so the agent's result
// names the pool task (subject tasks.pool, its sequence) as the operator
// sent it.
const (
	HeaderPoolSeq     = "Flock-Pool-Seq"     // the pool task's sequence on tasks.pool (the first one, across requeues)
	HeaderPoolAttempt = "Flock-Pool-Attempt" // 1 for the first agent given it, 2 after one take-back, ...
)

// PoolTaskSubject is where the bus puts the pool tasks it gives agent id.
func PoolTaskSubject(id string) string { return SubjectTasksPool + "." + id }

// PoolOrigin reads a pool copy's headers: the pool task's sequence and the
// attempt. ok is false for a task that is not a pool copy.
func PoolOrigin(get func(string) string) (seq uint64, attempt int, ok bool) {
	seq, err := strconv.ParseUint(strings.TrimSpace(get(HeaderPoolSeq)), 10, 64)
	if err != nil || seq == 0 {
		return 0, 0, false
	}
	attempt, err = strconv.Atoi(strings.TrimSpace(get(HeaderPoolAttempt)))
	if err != nil || attempt < 1 {
		attempt = 1
	}
	return seq, attempt, true
}

// Pool is what the bus needs to hand out pool tasks: each agent's slots and
// default task timeout, and how long past a task's timeout an agent may take
// to answer before the task is taken back.
type Pool struct {
	Agents []PoolAgent `json:"agents"`
	Grace  Duration    `json:"grace"`
}

// PoolAgent is one agent as the pool sees it.
type PoolAgent struct {
	ID          string   `json:"id"`
	Slots       int      `json:"slots"`       // CONCURRENCY: tasks it runs at once
	TaskTimeout Duration `json:"taskTimeout"` // its default task timeout
}
