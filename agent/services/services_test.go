package services_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/services"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

func plan(id string, tasks ...protocol.BoardTaskSpec) protocol.BoardPlan {
	return protocol.BoardPlan{Plan: id, Tasks: tasks}
}

// The board is the services', not the bus's: with the bus alone nobody
// answers; once the services run (their own user), the board works and
// their ready file is fresh; stopped, nobody answers again, and what was
// written stays in the bus for the next start.
func TestTheServicesServeTheBoard(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(1), bustest.WithoutServices())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := board.NewOperatorClient(f.Connect(t, protocol.OperatorUser))
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := op.List(short, "")
	stop()
	if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the board answered with the bus alone: %v", err)
	}

	ready := filepath.Join(t.TempDir(), "ready")
	s, err := services.Start(ctx, services.Config{URL: f.URL, NkeyFile: f.SeedFile(t, protocol.ServicesUser), ReadyFile: ready})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Apply(ctx, plan("p", protocol.BoardTaskSpec{ID: "a", Prompt: "x"})); err != nil {
		t.Fatal(err)
	}
	a1 := board.NewAgentClient(f.Connect(t, "agent-1"), "agent-1")
	if rep, err := a1.Claim(ctx, "", "", ""); err != nil || rep.Task.ID != "a" {
		t.Fatalf("claim: %+v %v", rep, err)
	}
	if err := services.CheckReady(ready, services.ReadyMaxAge); err != nil {
		t.Fatalf("serving, yet: %v", err)
	}
	s.Stop()
	short, stop = context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = a1.List(short, "")
	stop()
	if err == nil {
		t.Fatal("the board answered after the services stopped")
	}

	f.StartServices(t)
	tasks, err := a1.List(ctx, "p")
	if err != nil || len(tasks) != 1 || tasks[0].Status != protocol.BoardClaimed || tasks[0].Holder != "agent-1" {
		t.Fatalf("after a restart of the services: %+v %v", tasks, err)
	}
}

// What the services know of the agents follows the deploy: a label given
// to an agent in the stack's config reaches the running board through the
// bus's reload, with no restart of the services.
func TestTheServicesFollowTheTopology(t *testing.T) {
	t.Parallel()
	cfg := bustest.Agents(2)
	f := bustest.Start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := board.NewOperatorClient(f.Connect(t, protocol.OperatorUser))
	if _, err := op.Apply(ctx, plan("p", protocol.BoardTaskSpec{ID: "review", Prompt: "x", Labels: []string{"reviewer"}})); err != nil {
		t.Fatal(err)
	}
	a2 := board.NewAgentClient(f.Connect(t, "agent-2"), "agent-2")
	var be *protocol.BoardError
	if _, err := a2.Claim(ctx, "p", "", ""); !errors.As(err, &be) {
		t.Fatalf("agent-2 without the label: %v", err)
	}

	labelled := flock.Config{Target: "docker", Agents: []flock.AgentConfig{{ID: "agent-1"}, {ID: "agent-2", Labels: []string{"reviewer"}}}}
	f.Rerender(t, labelled)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err := a2.Claim(ctx, "p", "", "")
		if err == nil {
			if rep.Task.ID != "review" {
				t.Fatalf("claimed %+v", rep.Task)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent-2's label never reached the board: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The services outlive a restart of the bus: they reconnect, their views
// of the buckets follow again, and the board answers from what it held.
func TestTheServicesSurviveABusRestart(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op := board.NewOperatorClient(f.Connect(t, protocol.OperatorUser))
	if _, err := op.Apply(ctx, plan("p", protocol.BoardTaskSpec{ID: "a", Prompt: "x"}, protocol.BoardTaskSpec{ID: "b", Prompt: "y", Needs: []string{"a"}})); err != nil {
		t.Fatal(err)
	}
	a1 := board.NewAgentClient(f.Connect(t, "agent-1"), "agent-1")
	f.Bus.Shutdown()
	f.RestartBus(t)
	var rep *protocol.BoardReply
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; {
		if rep, err = a1.Claim(ctx, "p", "", ""); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || rep.Task.ID != "a" {
		t.Fatalf("claim after the bus restarted: %+v %v", rep, err)
	}
	if _, err := a1.Complete(ctx, "p", "a", protocol.BoardResult{Summary: "done"}); err != nil {
		t.Fatal(err)
	}
	// The dependent was promoted by a view that followed the restart.
	if rep, err = a1.Claim(ctx, "p", "", ""); err != nil || rep.Task.ID != "b" {
		t.Fatalf("the dependent after the restart: %+v %v", rep, err)
	}
	select {
	case <-f.Services.Dead():
		t.Fatal("the services gave up across the restart")
	default:
	}
}

func TestHealthNeedsAFreshReadyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "ready")
	if err := services.CheckReady(p, time.Minute); err == nil {
		t.Fatal("healthy with no ready file")
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := services.CheckReady(p, time.Minute); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if err := services.CheckReady(p, time.Minute); err == nil {
		t.Fatal("healthy with a stale ready file")
	}
}

func TestStartNeedsAKey(t *testing.T) {
	t.Parallel()
	_, err := services.Start(context.Background(), services.Config{URL: "nats://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), protocol.EnvServicesNkeyFile) || !strings.Contains(err.Error(), protocol.EnvServicesNkey) {
		t.Fatalf("no key: %v", err)
	}
}
