package command

import (
	"bytes"
	"errors"
	"testing"
)

func TestService(t *testing.T) {
	served := 0
	serve := func() int { served++; return 7 }
	for _, c := range []struct {
		args           []string
		health         error
		code, served   int
		stdout, stderr string
	}{
		{nil, nil, 7, 1, "", ""},
		{[]string{"run"}, nil, 7, 1, "", ""},
		{[]string{"health"}, nil, 0, 0, "healthy\n", ""},
		{[]string{"health"}, errors.New("no ready file"), 1, 0, "", "unhealthy: no ready file\n"},
		{[]string{"serve"}, nil, 2, 0, "", "usage: flock-x [run|health]\n"},
	} {
		served = 0
		var out, errb bytes.Buffer
		code := Service("flock-x", c.args, &out, &errb, serve, func() error { return c.health })
		if code != c.code || served != c.served || out.String() != c.stdout || errb.String() != c.stderr {
			t.Errorf("%q: code %d, served %d, stdout %q, stderr %q; want %d, %d, %q, %q",
				c.args, code, served, out.String(), errb.String(), c.code, c.served, c.stdout, c.stderr)
		}
	}
}
