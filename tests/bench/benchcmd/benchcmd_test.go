package benchcmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	for _, c := range []struct {
		args   []string
		err    error
		code   int
		stderr string
	}{
		{nil, nil, 0, ""},
		{[]string{"-h"}, nil, 0, "Usage of x:\n  -n int\n    \tcount (default 1)\n"},
		{[]string{"-bogus"}, nil, 2, "flag provided but not defined: -bogus\n"},
		{nil, errors.New("engine gone"), 1, "x: engine gone\n"},
		{nil, Usage{errors.New("-n wants 1 to 9")}, 2, "x: -n wants 1 to 9\n"},
	} {
		var out, errb bytes.Buffer
		measured := false
		code := Run(context.Background(), "x", c.args, &out, &errb, func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
			fs.Int("n", 1, "count")
			return func(context.Context, io.Writer, io.Writer) error { measured = true; return c.err }
		})
		if code != c.code || !bytes.HasPrefix(errb.Bytes(), []byte(c.stderr)) {
			t.Errorf("%q with %v: code %d, stderr %q; want %d, %q", c.args, c.err, code, errb.String(), c.code, c.stderr)
		}
		if measured != (c.args == nil) {
			t.Errorf("%q: measured %v, want it only when the flags parse and ask for no help", c.args, measured)
		}
	}
}

func TestMedian(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{{nil, 0}, {[]time.Duration{3 * s}, 3 * s}, {[]time.Duration{5 * s, 1 * s, 3 * s}, 3 * s}, {[]time.Duration{4 * s, 1 * s, 2 * s, 3 * s}, 2500 * time.Millisecond}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
