// Command fake-model serves fakemodel for the e2e tests, in a FROM-scratch
// container (build it with CGO_ENABLED=0).
//
//	FAKE_MODEL_ADDR    where to listen (default :9090)
//	FAKE_MODEL_KEY     the only key accepted (required: the e2e tests check
//	                   that the gateway, not the agent, holds it)
//	FAKE_MODEL_ANSWER  what the model answers
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ai-flock/ai-flock/tests/fakemodel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "fake-model")
	key := getenv("FAKE_MODEL_KEY")
	if key == "" {
		fmt.Fprintln(stderr, "FAKE_MODEL_KEY: required: the key the fake accepts")
		return 2
	}
	addr := getenv("FAKE_MODEL_ADDR")
	if addr == "" {
		addr = ":9090"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "FAKE_MODEL_ADDR:", err)
		return 1
	}
	srv := &http.Server{
		Handler:           fakemodel.New(fakemodel.Options{Answer: getenv("FAKE_MODEL_ANSWER"), RequireKey: key}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Info("listening", "addr", ln.Addr().String())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		log.Error("serve", "err", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Error("shutdown", "err", err)
	}
	return 0
}
