package protocol

import (
	"errors"
	"fmt"
	"testing"
)

func TestProblems(t *testing.T) {
	a, b := errors.New("a: bad"), errors.New("b: bad")
	for _, c := range []struct {
		err  error
		want []error
	}{
		{nil, nil},
		{a, []error{a}},
		{errors.Join(a, b), []error{a, b}},
		{fmt.Errorf("wrapped: %w", errors.Join(a, b)), []error{fmt.Errorf("wrapped: %w", errors.Join(a, b))}},
	} {
		got := Problems(c.err)
		if len(got) != len(c.want) {
			t.Fatalf("Problems(%v) = %v, want %v", c.err, got, c.want)
		}
		for i := range got {
			if got[i].Error() != c.want[i].Error() {
				t.Errorf("Problems(%v)[%d] = %v, want %v", c.err, i, got[i], c.want[i])
			}
		}
	}
}
