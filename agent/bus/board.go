package bus

import (
	"context"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// The board service (agent/board) runs in every bus node, on the node's
// admin connection: it starts once the node's topology is applied (the
// board's bucket is part of it), takes what the topology says of the
// agents on every reload, and stops before the connection closes.

// boardApplied hands the board service the topology just applied: it
// starts the service the first time, and gives it the agents' labels and
// limits after that. A service that could not start is tried again with
// the next topology applied.
func (s *Server) boardApplied(topo protocol.Topology) {
	s.boardMu.Lock()
	defer s.boardMu.Unlock()
	if s.boardClosed {
		return
	}
	if s.board != nil {
		s.board.SetConfig(topo.Board)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	b, err := board.Serve(ctx, s.nc, s.js, topo.Board, s.log.With("component", "board"), s.cfg.Board)
	if err != nil {
		s.log.Warn("board service not started (tried again with the next topology applied)", "err", err)
		return
	}
	s.board = b
}

// stopBoard stops the board service for good (Shutdown).
func (s *Server) stopBoard() {
	s.boardMu.Lock()
	b := s.board
	s.board, s.boardClosed = nil, true
	s.boardMu.Unlock()
	if b != nil {
		b.Stop()
	}
}
