// Package syncbuf is a bytes.Buffer that a program under test writes from
// its goroutines while the test reads it: the tests' stand-in for stdout.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for one writer and readers at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
