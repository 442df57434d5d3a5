package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const td = "arn:aws:ecs:eu-west-1:123456789012:task-definition/flock-agent-1:8"

// fakeECS answers DescribeServices (the JSON 1.1 protocol the SDK speaks)
// with the checker's fixtures in turn, the last one again once they run out.
func fakeECS(t *testing.T, files ...string) *int {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("X-Amz-Target"); got != "AmazonEC2ContainerServiceV20141113.DescribeServices" {
			http.Error(w, "unexpected "+got, http.StatusBadRequest)
			return
		}
		mu.Lock()
		f := files[min(calls, len(files)-1)]
		calls++
		mu.Unlock()
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", f+".json"))
		if err != nil {
			t.Error(err)
			return
		}
		var svc map[string]any
		_ = json.Unmarshal(b, &svc)
		epochs(svc) // the protocol's timestamps are seconds since the epoch
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"services": []any{svc}, "failures": []any{}})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_ECS", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fake")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	return &calls
}

func epochs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "createdAt" || k == "updatedAt") {
				if tm, err := time.Parse(time.RFC3339, s); err == nil {
					x[k] = tm.Unix()
				}
				continue
			}
			epochs(e)
		}
	case []any:
		for _, e := range x {
			epochs(e)
		}
	}
}

func verify(t *testing.T, timeout string) (string, error) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"--region", "eu-west-1", "--cluster", "flock-cluster", "--service", "flock-agent-1",
		"--task-definition", td, "--interval", "10ms", "--timeout", timeout}, &out)
	return out.String(), err
}

// Through the real SDK against an endpoint answering as ECS documents:
// a rollout that completes passes, one ECS rolls back fails naming the
// service and the state, one whose tasks never start fails at its deadline.
func TestVerifyFailsARolloutECSRolledBack(t *testing.T) {
	calls := fakeECS(t, "in-progress", "in-progress", "completed")
	out, err := verify(t, "1m")
	if err != nil || !strings.Contains(out, "service flock-agent-1: rolled out "+td+" (COMPLETED)") || *calls != 3 {
		t.Fatalf("a completed rollout: %q %v (%d calls)", out, err, *calls)
	}

	fakeECS(t, "in-progress", "rolled-back")
	if _, err := verify(t, "1m"); err == nil || !strings.Contains(err.Error(), "service flock-agent-1: rolled back: its primary deployment") ||
		!strings.Contains(err.Error(), "ECS deployment circuit breaker: tasks failed to start.") {
		t.Fatalf("a rolled-back rollout: %v", err)
	}

	fakeECS(t, "in-progress")
	if _, err := verify(t, "50ms"); err == nil || !strings.Contains(err.Error(), "service flock-agent-1: not started: deployment ecs-svc/2222222222222222222") {
		t.Fatalf("a rollout that never starts: %v", err)
	}
}
