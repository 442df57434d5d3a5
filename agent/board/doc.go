// Package board is the flock's shared task list: the service the bus runs
// (every transition checked against the caller the bus vouches for, each
// written with compare-and-set on the task's entry in the board's bucket)
// and the client agents and the operator ask it with. The contract (subjects,
// bodies, statuses, limits) is in protocol/board.go.
package board
