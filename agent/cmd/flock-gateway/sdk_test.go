package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go"
	anthropic2 "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/fakemodel"
)

// sdkEnv is an agent's environment as the stacks give it, for the official
// Go SDK: the gateway's /anthropic as its base URL and, in its own key
// variable, what the stack puts there (dev: the placeholder; aws: the
// agent's gateway token). Nothing else the SDK reads is set.
func sdkEnv(t *testing.T, gatewayURL, key string) {
	for _, k := range []string{"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR", "ANTHROPIC_CUSTOM_HEADERS",
		"ANTHROPIC_FEDERATION_RULE_ID", "ANTHROPIC_ORGANIZATION_ID", "ANTHROPIC_IDENTITY_TOKEN_FILE", "ANTHROPIC_IDENTITY_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", t.TempDir()) // no profile of the machine's
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(protocol.EnvAnthropicBaseURL, gatewayURL+"/anthropic")
	t.Setenv(protocol.EnvAnthropicAPIKey, key)
}

// sdkCalls makes one plain and one streamed call with the SDK of each major
// version, configured by the environment alone, and returns what each
// answered (or its error).
func sdkCalls(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]string{}
	{ // v1: the key in x-api-key
		c := anthropic.NewClient()
		params := anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
		if m, err := c.Messages.New(ctx, params); err != nil {
			out["v1"] = "error: " + err.Error()
		} else {
			out["v1"] = m.Content[0].Text
		}
		s := c.Messages.NewStreaming(ctx, params)
		var acc anthropic.Message
		for s.Next() {
			_ = acc.Accumulate(s.Current())
		}
		if err := s.Err(); err != nil {
			out["v1 stream"] = "error: " + err.Error()
		} else if len(acc.Content) > 0 {
			out["v1 stream"] = acc.Content[0].Text
		}
	}
	{ // v2: the key as Authorization: Bearer
		c := anthropic2.NewClient()
		params := anthropic2.MessageNewParams{Model: "claude-x", MaxTokens: 64,
			Messages: []anthropic2.MessageParam{anthropic2.NewUserMessage(anthropic2.NewTextBlock("hi"))}}
		if m, err := c.Messages.New(ctx, params); err != nil {
			out["v2"] = "error: " + err.Error()
		} else {
			out["v2"] = m.Content[0].Text
		}
		s := c.Messages.NewStreaming(ctx, params)
		var acc anthropic2.Message
		for s.Next() {
			_ = acc.Accumulate(s.Current())
		}
		if err := s.Err(); err != nil {
			out["v2 stream"] = "error: " + err.Error()
		} else if len(acc.Content) > 0 {
			out["v2 stream"] = acc.Content[0].Text
		}
	}
	return out
}

// The official anthropic-sdk-go, v1 and v2, configured by the environment
// the stacks give an agent, calls the model through the gateway, plain and
// streamed: on dev (callers by network) with the placeholder key, on aws
// (callers by token) with its gateway token however the SDK sends it (v1:
// x-api-key, v2: Authorization: Bearer). The fake model demands the real
// key, so each answer proves the gateway stripped what the SDK sent and put
// the real key in; without a key, v2 refuses to call at all.
func TestStockSDKConfiguredByTheEnvironment(t *testing.T) {
	const token = "flock-tok-agent-1-SDK-5e2b"
	fm, upURL := fakeUpstream(t, fakemodel.Options{RequireKey: realKey, Answer: "the fake's answer"})
	keyFile := writeFile(t, t.TempDir(), "anthropic", realKey)
	up := []protocol.GatewayUpstream{{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key", KeyFile: keyFile}}
	sum := sha256.Sum256([]byte(token))
	dev := start(t, configEnv(t, protocol.GatewayConfig{V: 1, Callers: protocol.CallersByNetwork, Upstreams: up,
		Agents: []protocol.GatewayAgent{{ID: "agent-1", Network: "127.0.0.0/8", BudgetTokens: 100000}}}))
	aws := start(t, configEnv(t, protocol.GatewayConfig{V: 1, Callers: protocol.CallersByToken, Upstreams: up,
		Agents: []protocol.GatewayAgent{{ID: "agent-1", TokenSHA256: hex.EncodeToString(sum[:]), BudgetTokens: 100000}}}))

	// Without a key the SDK does not call: why the stacks give it one.
	sdkEnv(t, dev.url, "")
	c := anthropic2.NewClient()
	_, err := c.Messages.New(context.Background(), anthropic2.MessageNewParams{Model: "claude-x", MaxTokens: 8,
		Messages: []anthropic2.MessageParam{anthropic2.NewUserMessage(anthropic2.NewTextBlock("hi"))}})
	if err == nil || !strings.Contains(err.Error(), "no Anthropic credentials found") {
		t.Errorf("v2 with a base URL and no key: %v, want its NoCredentialsError", err)
	}
	if n := len(fm.Seen()); n != 0 {
		t.Fatalf("the fake saw %d calls from a client without a key", n)
	}

	for _, tc := range []struct {
		name string
		g    *running
		key  string
	}{
		{"dev, the placeholder", dev, protocol.GatewayPlaceholderKey},
		{"aws, the gateway token", aws, token},
	} {
		before := len(fm.Seen())
		sdkEnv(t, tc.g.url, tc.key)
		got := sdkCalls(t)
		for _, k := range []string{"v1", "v1 stream", "v2", "v2 stream"} {
			if got[k] != "the fake's answer" {
				t.Errorf("%s: %s answered %q", tc.name, k, got[k])
			}
		}
		seen := fm.Seen()[before:]
		if len(seen) != 4 {
			t.Errorf("%s: the fake saw %d calls, want 4", tc.name, len(seen))
		}
		for _, s := range seen {
			if s.APIKey != realKey || s.Authorization != "" {
				t.Errorf("%s: the fake got x-api-key %q, authorization %q: want the real key alone", tc.name, s.APIKey, s.Authorization)
			}
		}
		// Each call was the agent's, metered (12 + 7 tokens from the fake).
		if n := strings.Count(tc.g.out.String(), `"agent":"agent-1"`); n < 4 {
			t.Errorf("%s: %d calls of agent-1 in the access log, want 4:\n%s", tc.name, n, tc.g.out.String())
		}
		noKeyIn(t, tc.g, token)
	}
	// A wrong token is refused before any upstream is called, as the SDK
	// reports it (401, not retried).
	before := len(fm.Seen())
	sdkEnv(t, aws.url, "flock-tok-not-an-agent")
	if got := sdkCalls(t); !strings.Contains(got["v2"], "401") || !strings.Contains(got["v1"], "401") {
		t.Errorf("an unknown token: %v, want 401", got)
	}
	if len(fm.Seen()) != before {
		t.Errorf("a call with an unknown token reached the upstream")
	}
}
