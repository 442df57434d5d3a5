package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type syncBuffer = syncbuf.Buffer

func TestServesWithTheKeyAndTheAnswer(t *testing.T) {
	env := map[string]string{"FAKE_MODEL_ADDR": "127.0.0.1:0", "FAKE_MODEL_KEY": "sk-e2e", "FAKE_MODEL_ANSWER": "pong"}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	code := make(chan int, 1)
	go func() { code <- run(ctx, func(k string) string { return env[k] }, &out, io.Discard) }()
	var addr string
	for deadline := time.Now().Add(5 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, l := range strings.Split(out.String(), "\n") {
			var m struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &m) == nil && m.Msg == "listening" {
				addr = m.Addr
			}
		}
	}
	if addr == "" {
		t.Fatalf("not listening: %s", out.String())
	}
	for key, want := range map[string]int{"sk-e2e": 200, "sk-other": 401} {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/messages", strings.NewReader(`{"model":"m"}`))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 200 && !strings.Contains(string(body), `"text":"pong"`)) {
			t.Errorf("key %s: %d %s", key, resp.StatusCode, body)
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not stop")
	}
}

func TestRefusesToStartWithoutAKey(t *testing.T) {
	var errOut bytes.Buffer
	if c := run(context.Background(), func(string) string { return "" }, io.Discard, &errOut); c != 2 || !strings.Contains(errOut.String(), "FAKE_MODEL_KEY") {
		t.Errorf("exit %d: %s", c, errOut.String())
	}
}
