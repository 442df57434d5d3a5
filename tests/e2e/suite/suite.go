// Package suite is the set-up the end-to-end suites on a real Docker engine
// share (tests/e2e, tests/e2e/cluster, tests/e2e/fargate): a suite run only
// when its variable is set, an engine that must answer, a teardown that
// runs whatever happens, and the wait for a flock's agents to be ready.
package suite

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// Gate is what a suite's tests check first: why they skip, when they do.
type Gate struct{ why string }

// Skip makes every test that needs the suite skip, saying why.
func (g *Gate) Skip(why string) { g.why = why }

// Skipped is why the suite's tests skip ("" when they run).
func (g *Gate) Skipped() string { return g.why }

// Need skips the test when the suite does not run.
func (g *Gate) Need(t testing.TB) {
	t.Helper()
	if g.why != "" {
		t.Skip(g.why)
	}
}

// Open begins a suite's run: a context an interrupt (SIGINT, SIGTERM)
// cancels, and the Docker engine, which must answer.
func Open() (context.Context, context.CancelFunc, *replay.Engine, error) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	engine, err := replay.NewEngine()
	if err == nil {
		err = engine.Ping(ctx)
	}
	if err != nil {
		return ctx, cancel, nil, fmt.Errorf("no Docker engine answers: %w", err)
	}
	return ctx, cancel, engine, nil
}

// Spec is a suite whose engine is required once it is switched on.
type Spec struct {
	Name string // in messages: "e2e cluster"
	On   string // the variable that runs it when "1": FLOCK_E2E_CLUSTER
	Off  string // what its tests say when it is not set
	Gate *Gate  // the suite's tests' gate

	SetUp           func(ctx context.Context, engine *replay.Engine) error
	TearDown        func(ctx context.Context) error // run after SetUp, whatever happened
	TearDownTimeout time.Duration
}

// Main is a suite's TestMain: it returns the exit code. Unless s.On is
// set, every test skips; otherwise no engine fails the suite, and the
// tests run after s.SetUp, s.TearDown after them (or after a failed
// set-up, or an interrupt).
func Main(m *testing.M, s Spec) (code int) {
	if os.Getenv(s.On) != "1" {
		s.Gate.Skip(s.Off)
		return m.Run()
	}
	ctx, cancel, engine, err := Open()
	defer cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
		return 1
	}
	defer func() {
		tctx, tcancel := context.WithTimeout(context.Background(), s.TearDownTimeout)
		defer tcancel()
		if err := s.TearDown(tctx); err != nil {
			fmt.Fprintf(os.Stderr, "%s teardown: %v\n", s.Name, err)
			code = 1
		}
	}()
	if err := s.SetUp(ctx, engine); err != nil {
		fmt.Fprintf(os.Stderr, "%s setup: %v\n", s.Name, err)
		return 1
	}
	return m.Run()
}
