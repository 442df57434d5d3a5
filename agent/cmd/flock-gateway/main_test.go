package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/gateway/service"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
	"github.com/ai-flock/ai-flock/protocol/egressca"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/fakemodel"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// realKey is the upstream's key: distinctive, so a test can say it appears
// in no output.
const (
	realKey  = "sk-ant-REAL-gw-KEY-7f3q-never-print"
	dummyKey = "sk-agent-DUMMY"
)

type syncBuffer = syncbuf.Buffer

// running is a gateway run() in this process.
type running struct {
	url, addr, healthAddr string
	out, errOut           *syncBuffer
	cancel                context.CancelFunc
	code                  chan int
}

// envOf is a getenv over m.
func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// writeFile writes content to a 0600 file in dir.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// configEnv writes cfg as the config file and returns the environment run
// needs: the file, loopback addresses on free ports.
func configEnv(t testing.TB, cfg any) map[string]string {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		protocol.EnvGatewayConfig: writeFile(t, t.TempDir(), "gateway.json", string(b)),
		envAddr:                   "127.0.0.1:0",
		envHealthAddr:             "127.0.0.1:0",
	}
}

// start runs the gateway with env until the test ends (or stop).
func start(t *testing.T, env map[string]string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &running{out: &syncBuffer{}, errOut: &syncBuffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() { g.code <- run(ctx, nil, envOf(env), g.out, g.errOut) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-g.code:
		case <-time.After(15 * time.Second):
			t.Error("the gateway did not stop")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for g.addr == "" {
		for _, l := range logLines(g.out.String()) {
			if l["msg"] == "listening" {
				g.addr, g.healthAddr = l["addr"].(string), l["health_addr"].(string)
			}
		}
		select {
		case c := <-g.code:
			t.Fatalf("run exited %d:\n%s%s", c, g.out.String(), g.errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not listening:\n%s", g.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.url = "http://" + g.addr
	return g
}

func logLines(s string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// call POSTs body to path with the header set, as a stock SDK would.
func call(t *testing.T, url, header, value, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func fakeUpstream(t *testing.T, opts fakemodel.Options) (*fakemodel.Server, string) {
	t.Helper()
	fm := fakemodel.New(opts)
	srv := httptest.NewServer(fm)
	t.Cleanup(srv.Close)
	return fm, srv.URL
}

func noKeyIn(t *testing.T, g *running, secrets ...string) {
	t.Helper()
	for _, s := range append(secrets, realKey) {
		if strings.Contains(g.out.String()+g.errOut.String(), s) {
			t.Errorf("the output holds %q:\n%s%s", s, g.out.String(), g.errOut.String())
		}
	}
}

// dev: the caller is known by its network; the upstream gets the real key
// and not the agent's dummy; the call's usage is on agent.agent-1.usage.
func TestNetworkCallerGetsTheAnswerAndUsageOnTheBus(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	op := f.Connect(t, protocol.OperatorUser)
	sub, err := op.SubscribeSync(protocol.UsageSubject("agent-1"))
	if err != nil {
		t.Fatal(err)
	}
	op.Flush()
	fm, upURL := fakeUpstream(t, fakemodel.Options{RequireKey: realKey, Answer: "the fake's answer"})
	dir := t.TempDir()
	env := configEnv(t, protocol.GatewayConfig{V: 1, Flock: "test", Callers: protocol.CallersByNetwork,
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key",
			KeyFile: writeFile(t, dir, "anthropic", realKey+"\n")}},
		Agents: []protocol.GatewayAgent{
			{ID: "agent-1", Network: "127.0.0.0/8", BudgetTokens: 1000},
			{ID: "agent-2", Network: "10.99.0.0/24"},
		},
		NATSURL: f.URL, NkeyFile: f.SeedFile(t, protocol.GatewayUser),
	})
	g := start(t, env)
	// An agent cannot forge its usage: only the gateway's user may publish it.
	a1 := f.Connect(t, "agent-1")
	a1.Publish(protocol.UsageSubject("agent-1"), []byte("forged by agent-1"))
	a1.Flush()

	st, body := call(t, g.url+"/anthropic/v1/messages", "X-Api-Key", dummyKey,
		`{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	var msg struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal([]byte(body), &msg); st != 200 || err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "the fake's answer" {
		t.Fatalf("call: %d %s", st, body)
	}
	if seen := fm.Seen(); len(seen) != 1 || seen[0].APIKey != realKey {
		t.Errorf("the upstream saw %+v: want the real key, not the agent's dummy", seen)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no usage on %s: %v", protocol.UsageSubject("agent-1"), err)
	}
	var u protocol.Usage
	if err := json.Unmarshal(m.Data, &u); err != nil {
		t.Fatalf("%q on %s: %v", m.Data, m.Subject, err)
	}
	if u.V != 1 || u.Agent != "agent-1" || u.Upstream != "anthropic" || u.Status != 200 ||
		u.InputTokens != 12 || u.OutputTokens != 7 || u.Total != 19 || u.SpentTokens != 19 || u.BudgetTokens != 1000 ||
		time.Since(u.Time) > time.Minute {
		t.Errorf("usage %s", m.Data)
	}
	var h service.HealthReport
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + g.healthAddr + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&h)
		return resp.StatusCode == 200 && h == service.HealthReport{Status: "ok", Upstreams: 1, Agents: 2, Bus: "connected"}
	}, "healthz ok with the bus connected")
	noKeyIn(t, g, dummyKey)
	// The access log is the library's, in the service's log.
	waitFor(t, func() bool {
		for _, l := range logLines(g.out.String()) {
			if l["msg"] == "model call" && l["service"] == "flock-gateway" && l["agent"] == "agent-1" && l["total_tokens"] == 19.0 {
				return true
			}
		}
		return false
	}, "the call's access log line")
}

// aws: the caller is known by its token; the token never reaches the
// upstream, a wrong one is refused with a JSON error, CONNECT takes it as
// the proxy password.
func TestTokenCallers(t *testing.T) {
	t.Parallel()
	const tokA, tokB = "flock-tok-AAAA-1234", "flock-tok-BBBB-5678"
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	fm, upURL := fakeUpstream(t, fakemodel.Options{RequireKey: realKey})
	echoPort := echoListener(t)
	echo := "localhost:" + strconv.Itoa(echoPort)
	dir := t.TempDir()
	env := configEnv(t, protocol.GatewayConfig{V: 1, Callers: protocol.CallersByToken,
		Upstreams: []protocol.GatewayUpstream{
			{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key", KeyFile: writeFile(t, dir, "anthropic", realKey)},
			{Name: "openai", URL: upURL + "/v1", KeyHeader: "Authorization", KeyPrefix: "Bearer ", KeyEnv: "OPENAI_KEY"},
		},
		Agents: []protocol.GatewayAgent{
			{ID: "agent-1", TokenSHA256: sum(tokA)},
			{ID: "agent-2", TokenSHA256: sum(tokB)},
		},
		// agent-1 may open a tunnel to the echo server: a name resolving to
		// loopback, which only a rule naming the range lets it reach.
		Egress: &protocol.GatewayEgress{Rules: []egress.Rule{{Host: "localhost", Port: echoPort, Tunnel: true, Agents: []string{"agent-1"}, PrivateRanges: []string{"127.0.0.0/8"}}}},
	})
	env["OPENAI_KEY"] = realKey
	g := start(t, env)

	for _, tc := range []struct {
		path, header, value string
		want                int
	}{
		{"/anthropic/v1/messages", "X-Api-Key", tokA, 200},
		{"/anthropic/v1/messages", "Authorization", "Bearer " + tokB, 200},
		{"/openai/chat/completions", "Authorization", "bearer " + tokA, 200},
		{"/anthropic/v1/messages", "X-Api-Key", tokA + "x", 401},
		{"/anthropic/v1/messages", "X-Api-Key", sum(tokA), 401}, // the hash is not the token
		{"/anthropic/v1/messages", "", "", 401},
	} {
		st, body := call(t, g.url+tc.path, tc.header, tc.value, `{"model":"m"}`)
		if st != tc.want {
			t.Errorf("%s %s %q: %d, want %d: %s", tc.path, tc.header, tc.value, st, tc.want, body)
		}
		if st == 401 {
			var e struct {
				Type  string            `json:"type"`
				Error map[string]string `json:"error"`
			}
			if json.Unmarshal([]byte(body), &e) != nil || e.Type != "error" || e.Error["type"] != "unknown_caller" {
				t.Errorf("401 body: %s", body)
			}
		}
	}
	seen := fm.Seen()
	if len(seen) != 3 {
		t.Fatalf("the upstream saw %d calls, want the 3 with a known token", len(seen))
	}
	for _, s := range seen {
		got := s.APIKey + "|" + s.Authorization
		if strings.Contains(got, "flock-tok") || (s.APIKey != realKey && s.Authorization != "Bearer "+realKey) {
			t.Errorf("the upstream got x-api-key %q, authorization %q", s.APIKey, s.Authorization)
		}
	}
	// CONNECT: the token as the proxy password opens agent-1's allowed host.
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+tokA)), 200},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+tokB)), 403}, // agent-2: not in its list
		{"", 407},
	} {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		req := "CONNECT " + echo + " HTTP/1.1\r\nHost: " + echo + "\r\n"
		if tc.auth != "" {
			req += "Proxy-Authorization: " + tc.auth + "\r\n"
		}
		io.WriteString(c, req+"\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != tc.want {
			t.Errorf("CONNECT with %q: %v %v, want %d", tc.auth, resp.Status, err, tc.want)
		} else if tc.want == 200 {
			io.WriteString(c, "ping\n")
			if line, err := br.ReadString('\n'); line != "ping\n" {
				t.Errorf("through the tunnel: %q %v", line, err)
			}
		}
		c.Close()
	}
	noKeyIn(t, g, tokA, tokB)
}

func echoListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// runOnce runs the gateway with env and returns at once if it exits (a bad
// configuration), failing the test if it starts serving.
func runOnce(t *testing.T, env map[string]string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	code := run(ctx, nil, envOf(env), &out, &errOut)
	if strings.Contains(out.String(), `"msg":"listening"`) {
		t.Errorf("it started serving:\n%s", out.String())
	}
	return code, out.String() + errOut.String()
}

func TestBadConfigNamesEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := writeFile(t, dir, "key", realKey)
	env := configEnv(t, map[string]any{
		"v": 0, "callers": "network", "natsUrl": "http://bus:4222",
		"upstreams": []map[string]any{
			{"name": "Bad Name", "url": "ftp://x", "keyHeader": "bad header", "keyFile": filepath.Join(dir, "missing")},
			{"name": "ok", "url": "https://x", "keyHeader": "x-api-key", "keyFile": key, "keyEnv": "K"},
			{"name": "ok", "url": "https://x", "keyHeader": "x-api-key", "keyFile": key},
		},
		"agents": []map[string]any{
			{"id": "agent-1", "network": "10.0.0.0/24"},
			{"id": "agent-1", "network": "10.0.0.128/25"},
			{"id": "agent-3", "network": "not-a-cidr", "budgetTokens": -1},
			{"id": "agent-4", "network": "10.1.0.5/24"},
		},
		"egress": map[string]any{
			"rules": []map[string]any{{"host": "*"}, {"host": "a.example.com", "agents": []string{"agent-9"}}},
			"pool":  []string{"nope"},
		},
	})
	code, out := runOnce(t, env)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{
		`v: must be 1 (got 0)`,
		`upstreams[0].name: must match`,
		`upstreams[0].url: must be an absolute http or https URL (got \"ftp://x\")`,
		`upstreams[0].keyHeader: must be a header name`,
		`upstreams[0].keyFile: open ` + filepath.Join(dir, "missing") + `: no such file or directory (upstream \"Bad Name\"'s key)`,
		`upstreams[1]: set only one of keyFile and keyEnv`,
		`upstreams[2].name: \"ok\" is upstreams[1]'s name too`,
		`agents[1].id: \"agent-1\" is agents[0]'s ID too`,
		`agents[1].network: 10.0.0.128/25 overlaps agents[0].network 10.0.0.0/24`,
		`agents[2].network: must be a CIDR`,
		`agents[2].budgetTokens: must be >= 0`,
		`egress.pool[0]: must be a CIDR (got \"nope\")`,
		`egress.rules[0].host:`,
		`egress.rules[1].agents[0]: \"agent-9\" is not an agent of the flock`,
		`egress: set caSeedFile or caSeedEnv (the egress CA's seed, needed by brokered rules)`,
		`agents[3].network: must be a network's address, 10.1.0.0/24`,
		`natsUrl: must be nats:// or tls:// URLs`,
		`nkeyFile: set nkeyFile or nkeyEnv`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	if strings.Contains(out, realKey) {
		t.Errorf("a key is in the output:\n%s", out)
	}

	for name, tc := range map[string]struct {
		cfg  any
		want string
	}{
		"callers":       {map[string]any{"v": 1, "callers": "ip"}, `callers: must be \"network\" (each agent on its own network) or \"token\"`},
		"unknown field": {map[string]any{"v": 1, "callers": "token", "upstreams": []map[string]any{{"name": "a", "keyPath": "x"}}}, `json: unknown field \"keyPath\"`},
		"token": {map[string]any{"v": 1, "callers": "token", "agents": []map[string]any{
			{"id": "agent-1", "tokenSha256": "ABC"},
			{"id": "agent-2", "tokenSha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		}}, `agents[0].tokenSha256: must be 64 lower-case hex digits`},
		"empty token": {map[string]any{"v": 1, "callers": "token", "agents": []map[string]any{
			{"id": "agent-1", "tokenSha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		}}, `agents[0].tokenSha256: is the SHA-256 of the empty string`},
		"nkey": {map[string]any{"v": 1, "callers": "token", "natsUrl": "nats://127.0.0.1:4222", "nkeyFile": key},
			`nkeyFile: not an nkey seed`},
		"otlp scheme": {map[string]any{"v": 1, "callers": "token", "otlpEndpoint": "grpc://collector:4317"},
			`otlpEndpoint: must be an http:// or https:// URL (OTLP/HTTP)`},
		"otlp password": {map[string]any{"v": 1, "callers": "token", "otlpEndpoint": "https://u:pw-secret@collector"},
			`otlpEndpoint: must not carry a user or password`},
	} {
		code, out := runOnce(t, configEnv(t, tc.cfg))
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want 2 and %s in:\n%s", name, code, tc.want, out)
		}
		if strings.Contains(out, realKey) {
			t.Errorf("%s: the key file's content is in the output", name)
		}
	}
	if code, out := runOnce(t, map[string]string{protocol.EnvGatewayConfig: filepath.Join(dir, "none.json")}); code != 2 ||
		!strings.Contains(out, "FLOCK_GATEWAY_CONFIG: open "+filepath.Join(dir, "none.json")) {
		t.Errorf("no config file: %d %s", code, out)
	}
}

// A key that cannot be read is named by its upstream and its file or
// variable; no key's text is printed, not even one that was read.
func TestKeyProblemsNameTheUpstreamNeverTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up := func(name, file, env string) protocol.GatewayUpstream {
		return protocol.GatewayUpstream{Name: name, URL: "https://api.example.com", KeyHeader: "x-api-key", KeyFile: file, KeyEnv: env}
	}
	env := configEnv(t, protocol.GatewayConfig{V: 1, Callers: "token", Upstreams: []protocol.GatewayUpstream{
		up("anthropic", filepath.Join(dir, "gone"), ""),
		up("openai", "", "OPENAI_KEY"),
		up("two-lines", writeFile(t, dir, "two", realKey+"\nsecond-line-of-the-key\n"), ""),
		up("empty", writeFile(t, dir, "empty", "\n"), ""),
		up("good", writeFile(t, dir, "good", realKey+"\n"), ""),
		up("device", "/dev/zero", ""),
	}, Agents: []protocol.GatewayAgent{{ID: "agent-1", TokenSHA256: "nope"}}})
	code, out := runOnce(t, env)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{
		`upstreams[0].keyFile: open ` + filepath.Join(dir, "gone") + `: no such file or directory (upstream \"anthropic\"'s key)`,
		`upstreams[1].keyEnv: $OPENAI_KEY is unset or empty (upstream \"openai\"'s key)`,
		`upstreams[2].keyFile: must hold one line (upstream \"two-lines\"'s key)`,
		`upstreams[3].keyFile: ` + filepath.Join(dir, "empty") + ` is empty (upstream \"empty\"'s key)`,
		`upstreams[5].keyFile: /dev/zero is over 64 KiB: not a key`,
		`agents[0].tokenSha256`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	for _, secret := range []string{realKey, "second-line-of-the-key"} {
		if strings.Contains(out, secret) {
			t.Errorf("the output holds %q:\n%s", secret, out)
		}
	}
}

// aws: the config arrives in the environment parts, the key in a variable.
func TestConfigFromTheEnvironment(t *testing.T) {
	t.Parallel()
	fm, upURL := fakeUpstream(t, fakemodel.Options{RequireKey: realKey})
	tok := "flock-tok-env"
	h := sha256.Sum256([]byte(tok))
	b, _ := json.Marshal(protocol.GatewayConfig{V: 1, Callers: "token",
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key", KeyEnv: "ANTHROPIC_KEY"}},
		Agents:    []protocol.GatewayAgent{{ID: "agent-7", TokenSHA256: hex.EncodeToString(h[:])}},
	})
	parts, err := protocol.EncodeEnv(b)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		protocol.EnvGatewayConfig:                             "/nonexistent/gateway.json", // the parts win
		protocol.EnvPartsVar(protocol.EnvGatewayConfigData):   "1",
		protocol.EnvPartVar(protocol.EnvGatewayConfigData, 1): parts[0],
		"ANTHROPIC_KEY": realKey, envAddr: "127.0.0.1:0", envHealthAddr: "127.0.0.1:0",
	}
	g := start(t, env)
	if st, body := call(t, g.url+"/anthropic/v1/messages", "X-Api-Key", tok, `{"model":"m"}`); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	if s := fm.Seen(); len(s) != 1 || s[0].APIKey != realKey {
		t.Errorf("seen %+v", s)
	}
	noKeyIn(t, g, tok)

	env[protocol.EnvPartsVar(protocol.EnvGatewayConfigData)] = "2"
	if code, out := runOnce(t, env); code != 2 || !strings.Contains(out, "FLOCK_GATEWAY_CONFIG_DATA_PART_2 is empty or unset") {
		t.Errorf("a missing part: %d %s", code, out)
	}
}

// busDownEnv is the environment of a gateway for agent whose bus is down:
// nothing listens at its natsUrl. seed is the gateway's bus seed.
func busDownEnv(t *testing.T, upURL string, agent protocol.GatewayAgent) (env map[string]string, seed string) {
	t.Helper()
	kp, _ := nkeys.CreateUser()
	raw, _ := kp.Seed()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "nats://" + dead.Addr().String()
	dead.Close() // nothing listens there
	env = configEnv(t, protocol.GatewayConfig{V: 1, Callers: "network",
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key", KeyEnv: "K"}},
		Agents:    []protocol.GatewayAgent{agent},
		NATSURL:   deadURL, NkeyEnv: "SEED",
	})
	env["K"], env["SEED"] = realKey, string(raw)
	return env, string(raw)
}

// A bus that is down never fails the call of an agent without a budget (its
// cost is written when the bus is back), and health says so.
func TestBusDownNeverFailsACall(t *testing.T) {
	t.Parallel() // its own gateway; no signals
	_, upURL := fakeUpstream(t, fakemodel.Options{})
	env, seed := busDownEnv(t, upURL, protocol.GatewayAgent{ID: "agent-1", Network: "127.0.0.1/32"})
	g := start(t, env)
	for range 3 {
		if st, body := call(t, g.url+"/anthropic/v1/messages", "", "", `{"model":"m"}`); st != 200 {
			t.Fatalf("%d %s", st, body)
		}
	}
	resp, err := http.Get("http://" + g.healthAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h service.HealthReport
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h.Status != "ok" || h.Bus != "disconnected" {
		t.Errorf("health %+v", h)
	}
	noKeyIn(t, g, seed)
}

// health answers 0 while the gateway runs; SIGTERM lets a stream in flight
// finish, then run exits 0 and health answers 1.
func TestHealthAndGracefulStop(t *testing.T) {
	t.Parallel()
	_, upURL := fakeUpstream(t, fakemodel.Options{Slow: time.Second})
	env := configEnv(t, protocol.GatewayConfig{V: 1, Callers: "network",
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key", KeyEnv: "K"}},
		Agents:    []protocol.GatewayAgent{{ID: "agent-1", Network: "127.0.0.0/8"}},
	})
	env["K"] = realKey
	g := start(t, env)
	healthEnv := envOf(map[string]string{envHealthAddr: g.healthAddr})
	var out, errOut bytes.Buffer
	if c := run(context.Background(), []string{"health"}, healthEnv, &out, &errOut); c != 0 {
		t.Fatalf("health while running: %d %s", c, errOut.String())
	}

	req, _ := http.NewRequest("POST", g.url+"/anthropic/v1/messages", strings.NewReader(`{"model":"fake-slow","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "event: message_start\n" {
		t.Fatalf("first line %q", line)
	}
	g.cancel() // SIGTERM, the stream in flight
	select {
	case c := <-g.code:
		t.Fatalf("run exited %d with a stream in flight", c)
	case <-time.After(200 * time.Millisecond):
	}
	rest, err := io.ReadAll(br)
	if err != nil || !strings.HasSuffix(string(rest), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("the stream in flight did not finish: %v %q", err, rest)
	}
	select {
	case c := <-g.code:
		if c != 0 {
			t.Errorf("exit %d, want 0", c)
		}
		g.code <- c // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after the stream ended")
	}
	if c := run(context.Background(), []string{"health"}, healthEnv, &out, &errOut); c != 1 || !strings.Contains(errOut.String(), "unhealthy") {
		t.Errorf("health after the stop: %d %s", c, errOut.String())
	}
	if c, err := net.Dial("tcp", g.addr); err == nil {
		c.Close()
		t.Errorf("the gateway still accepts connections after the stop")
	}
	if c := run(context.Background(), []string{"bogus"}, healthEnv, &out, &errOut); c != 2 {
		t.Errorf("an unknown command: exit %d", c)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, what, cond)
}

// SIGHUP: the gateway reads its config again and applies it to new calls; an
// agent keeps what it spent (its new, lower budget is already used up); a
// config with problems is refused and the one in use kept.
func TestReloadOnSIGHUPKeepsWhatAgentsSpent(t *testing.T) {
	t.Parallel()
	_, upURL := fakeUpstream(t, fakemodel.Options{RequireKey: realKey})
	dir := t.TempDir()
	cfg := protocol.GatewayConfig{V: 1, Flock: "test", Callers: protocol.CallersByNetwork,
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key",
			KeyFile: writeFile(t, dir, "anthropic", realKey)}},
		Agents: []protocol.GatewayAgent{{ID: "agent-1", Network: "127.0.0.0/8", BudgetTokens: 1000}},
	}
	env := configEnv(t, cfg)
	g := start(t, env)
	body := `{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	if st, b := call(t, g.url+"/anthropic/v1/messages", "X-Api-Key", dummyKey, body); st != 200 {
		t.Fatalf("first call: %d %s", st, b)
	}
	hup := func(c any) {
		raw, _ := json.Marshal(c)
		if err := os.WriteFile(env[protocol.EnvGatewayConfig], raw, 0o644); err != nil {
			t.Fatal(err)
		}
		before := strings.Count(g.out.String(), `"reload`)
		syscall.Kill(os.Getpid(), syscall.SIGHUP)
		waitFor(t, func() bool { return strings.Count(g.out.String(), `"reload`) > before }, "the reload to be logged")
	}
	cfg.Agents[0].BudgetTokens = 19 // what the first call cost
	hup(cfg)
	if st, b := call(t, g.url+"/anthropic/v1/messages", "X-Api-Key", dummyKey, body); st != 429 || !strings.Contains(b, `"spent":19`) {
		t.Errorf("after a reload lowering the budget to what was spent: %d %s, want 429 with spent 19", st, b)
	}
	bad := cfg
	bad.Callers = "by-guesswork"
	hup(bad)
	if !strings.Contains(g.out.String(), "reload refused") {
		t.Errorf("a bad config was not refused:\n%s", g.out.String())
	}
	if st, _ := call(t, g.url+"/anthropic/v1/messages", "X-Api-Key", dummyKey, body); st != 429 {
		t.Errorf("after a refused reload: %d, want the config in use (budget spent: 429)", st)
	}
}

// The ledger is the bus's: a gateway stopped and started again (a restart,
// a redeploy) refuses an agent whose budget the first one spent; the
// operator's raise lets it call again.
func TestRestartContinuesFromTheBusLedger(t *testing.T) {
	t.Parallel() // its own gateway and bus; no signals
	f := bustest.Start(t, bustest.Agents(2))
	fm, upURL := fakeUpstream(t, fakemodel.Options{RequireKey: realKey})
	dir := t.TempDir()
	env := configEnv(t, protocol.GatewayConfig{V: 1, Flock: "test", Callers: protocol.CallersByNetwork,
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: upURL, KeyHeader: "x-api-key",
			KeyFile: writeFile(t, dir, "anthropic", realKey)}},
		Agents:  []protocol.GatewayAgent{{ID: "agent-1", Network: "127.0.0.0/8", BudgetTokens: 19, BudgetWindow: protocol.WindowDay}},
		NATSURL: f.URL, NkeyFile: f.SeedFile(t, protocol.GatewayUser),
	})
	body := `{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	first := start(t, env)
	if st, b := call(t, first.url+"/anthropic/v1/messages", "", "", body); st != 200 {
		t.Fatalf("first call: %d %s", st, b)
	}
	first.cancel() // SIGTERM: calls end, what they cost is written, then it stops
	<-first.code
	first.code <- 0
	again := start(t, env)
	st, b := call(t, again.url+"/anthropic/v1/messages", "", "", body)
	if st != 429 || !strings.Contains(b, `"spent":19`) || !strings.Contains(b, `"reset":"`) {
		t.Errorf("a restarted gateway: %d %s, want 429 with spent 19 and the window's reset", st, b)
	}
	if n := len(fm.Seen()); n != 1 {
		t.Errorf("the upstream saw %d calls, want 1", n)
	}
	kv, err := ledger.Bucket(context.Background(), bustest.JetStream(t, f.Connect(t, protocol.OperatorUser)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Raise(context.Background(), kv, "agent-1", 100, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The gateway learns of the raise on its next write (its cached entry
	// still says spent): the quick refusal reads only what it knows, so the
	// first call after a raise may need the gateway to read the entry again.
	waitFor(t, func() bool {
		st, _ := call(t, again.url+"/anthropic/v1/messages", "", "", body)
		return st == 200
	}, "a call after the operator's raise")
}

// A call of an agent with a budget is refused (503, retry) while the ledger
// cannot be reached: never forwarded unmetered.
func TestBudgetedCallRefusedWithoutTheBus(t *testing.T) {
	t.Parallel() // its own gateway; no signals
	fm, upURL := fakeUpstream(t, fakemodel.Options{})
	env, _ := busDownEnv(t, upURL, protocol.GatewayAgent{ID: "agent-1", Network: "127.0.0.1/32", BudgetTokens: 1000})
	g := start(t, env)
	st, body := call(t, g.url+"/anthropic/v1/messages", "", "", `{"model":"m"}`)
	if st != 503 || !strings.Contains(body, "ledger_unavailable") {
		t.Errorf("bus down, budgeted agent: %d %s, want 503 ledger_unavailable", st, body)
	}
	if n := len(fm.Seen()); n != 0 {
		t.Errorf("the upstream saw %d calls, want none", n)
	}
}

// The way out, as the gateway binary runs it from its config: a brokered
// rule with a credential read from its key file and the egress CA from its
// seed file. A stock Go client with the gateway as HTTPS proxy (its token
// as the proxy password) and the flock's CA as its roots reads the
// upstream; the upstream sees the operator's credential, never the agent's;
// a method the rule does not allow is refused with a 403 naming the rule.
func TestBrokeredEgress(t *testing.T) {
	t.Parallel()
	const tok, credential = "flock-tok-EGRESS-1", "ghp-operator-only-credential"
	sum := sha256.Sum256([]byte(tok))
	// The upstream plays the internet: a TLS server for localhost whose
	// certificate comes from a CA of the test's own (the rule's roots).
	upCA, err := egressca.New(bytes.Repeat([]byte{9}, egressca.SeedSize), "upstream")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := upCA.Leaf("localhost")
	if err != nil {
		t.Fatal(err)
	}
	var seen syncbuf.Buffer
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(&seen, "%s %s auth=%q\n", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		io.WriteString(w, "from upstream")
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	up.StartTLS()
	t.Cleanup(up.Close)
	port := up.Listener.Addr().(*net.TCPAddr).Port

	seed := bytes.Repeat([]byte{4}, egressca.SeedSize)
	dir := t.TempDir()
	env := configEnv(t, protocol.GatewayConfig{V: 1, Flock: "egress-test", Callers: protocol.CallersByToken,
		Upstreams: []protocol.GatewayUpstream{{Name: "anthropic", URL: "https://127.0.0.1:1", KeyHeader: "x-api-key", KeyFile: writeFile(t, dir, "anthropic", realKey)}},
		Agents:    []protocol.GatewayAgent{{ID: "agent-1", TokenSHA256: hex.EncodeToString(sum[:])}},
		Egress: &protocol.GatewayEgress{
			Rules: []egress.Rule{{Host: "localhost", Port: port, PrivateRanges: []string{"127.0.0.0/8"}, Roots: upCA.PEM(),
				Credential: &egress.Credential{Header: "Authorization", Prefix: "Bearer ", File: writeFile(t, dir, "egress.gh", credential)}}},
			CASeedFile: writeFile(t, dir, "egress.ca-seed", hex.EncodeToString(seed)),
		},
	})
	g := start(t, env)

	flockCA, err := egressca.New(seed, "egress-test")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(flockCA.Certificate())
	proxy, _ := url.Parse("http://agent:" + tok + "@" + g.addr)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: roots}}}
	target := fmt.Sprintf("https://localhost:%d", port)

	req, _ := http.NewRequest("GET", target+"/repo/info/refs", nil)
	req.Header.Set("Authorization", "Bearer agent-held-token")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "from upstream" {
		t.Fatalf("GET through the broker: %s %q", resp.Status, body)
	}
	resp, err = client.Post(target+"/repo/git-receive-pack", "application/x-git-receive-pack-request", strings.NewReader("0000"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"agent":"agent-1"`) || !strings.Contains(string(body), "POST") ||
		!strings.Contains(string(body), "/repo/git-receive-pack") {
		t.Errorf("a push the rule does not allow: %s %s", resp.Status, body)
	}
	if got, want := seen.String(), "GET /repo/info/refs auth=\"Bearer "+credential+"\"\n"; got != want {
		t.Errorf("the upstream saw:\n%s\nwant:\n%s", got, want)
	}
	client.CloseIdleConnections()
	testkit.WaitFor(t, 5*time.Second, "the connection's egress record", func() bool { return strings.Contains(g.out.String()+g.errOut.String(), `"msg":"egress"`) })
	noKeyIn(t, g, tok, credential, "agent-held-token")
}
