// Package benchcmd is the shape the benchmark commands under tests/bench
// share: their flags, a context that SIGTERM and SIGINT cancel, their exit
// codes, and the median their tables print.
package benchcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"
)

// Main runs the command name: define adds its flags to fs and returns what
// measures once they are parsed. Exit codes: 0, 1 for a failure (printed
// with the command's name), 2 for bad flags or a Usage error.
func Main(name string, define func(fs *flag.FlagSet) (measure func(ctx context.Context, stdout, stderr io.Writer) error)) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := Run(ctx, name, os.Args[1:], os.Stdout, os.Stderr, define)
	stop()
	os.Exit(code)
}

// Run is Main's body, for a test.
func Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer, define func(fs *flag.FlagSet) (measure func(ctx context.Context, stdout, stderr io.Writer) error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	measure := define(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := measure(ctx, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		if errors.As(err, new(Usage)) {
			return 2
		}
		return 1
	}
	return 0
}

// Usage is an error in how the command was called (exit code 2).
type Usage struct{ Err error }

func (u Usage) Error() string { return u.Err.Error() }

// Median is the middle figure (the mean of the two middle ones for an even
// count; 0 for none).
func Median(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
