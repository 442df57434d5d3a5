package testkit

import (
	"errors"
	"sync"
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
)

// AtOnce calls do(0) … do(n-1), each in a goroutine of its own, released
// together so that they race, and returns what each returned, by index.
func AtOnce[T any](n int, do func(i int) (T, error)) ([]T, []error) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		out   = make([]T, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = do(i)
		}()
	}
	close(start)
	wg.Wait()
	return out, errs
}

// CountAtOnce is how many of n calls made AtOnce say yes; an error fails t.
func CountAtOnce(t testing.TB, n int, do func(i int) (bool, error)) int {
	t.Helper()
	oks, errs := AtOnce(n, do)
	yes := 0
	for i, ok := range oks {
		if errs[i] != nil {
			t.Error(errs[i])
		} else if ok {
			yes++
		}
	}
	return yes
}

// Refusals sorts the errors of board requests made AtOnce: the calls that
// passed (by index) and the board's refusals by code. Any other error
// fails t.
func Refusals(t testing.TB, errs []error) (passed []int, codes map[string]int) {
	t.Helper()
	codes = map[string]int{}
	for i, err := range errs {
		var be *protocol.BoardError
		switch {
		case err == nil:
			passed = append(passed, i)
		case errors.As(err, &be):
			codes[be.Code]++
		default:
			t.Errorf("call %d: %v", i, err)
		}
	}
	return passed, codes
}
