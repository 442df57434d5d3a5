package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egressca"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// The way out on the real engine. "The internet" is a network of the
// test's own in TEST-NET-3 (203.0.113.0/24, outside the flock's pool and
// every range the gateway refuses), joined by the gateway only, where
// gitremote serves a git repository over HTTPS with a certificate from a
// CA of the test's own and demands a credential only the gateway holds.
// agent-6 (Debian, with git and curl) may fetch from it; agent-1 has a
// tunnel rule for a name that resolves to the fake model, inside the
// flock's pool.
const (
	internetNet      = "e2e-internet"
	internetSubnet   = "203.0.113.0/24"
	gitRemoteIP      = "203.0.113.10"
	gitRemoteHost    = "git.e2e.example"
	gitRemotePort    = 8443
	gitRemoteName    = "e2e-gitremote"
	gitTokenConfig   = "flock:e2eGitToken"
	gitToken         = "ghp-e2e-operator-only-4b1d"
	gitMarker        = "fetched through the flock's egress broker"
	pypiHost         = "pypi.e2e.example"    // gitremote's PyPI simple index
	goproxyHost      = "goproxy.e2e.example" // gitremote's Go module proxy
	egressAgent      = ownImageAgent
	inPoolName       = "model.e2e.example" // the fake model's alias on the egress network
	inPoolTunnelPort = 9090
	// toolsImage is the Debian root with Python, git and curl
	// (tests/images/debian-python.sh): agent-6's image starts from it.
	toolsImage = "flock-test/bookworm-tools:latest"
)

// gitRemoteSeed is the test's own CA's seed: gitremote issues its
// certificates from it, and the egress rules name the CA as the hosts'
// roots (the policy pack flags such a rule).
var gitRemoteSeed = bytes.Repeat([]byte{0x5a}, egressca.SeedSize)

func gitRemoteCA() (*egressca.CA, error) {
	return egressca.New(gitRemoteSeed, "e2e-internet")
}

// e2eEgress is flock:gateway.egress of the e2e flock.
func e2eEgress() string {
	ca, err := gitRemoteCA()
	if err != nil {
		panic(err)
	}
	rules := []map[string]any{
		// Fetch from any repository, push to work.git only.
		{"host": gitRemoteHost, "port": gitRemotePort, "agents": []string{egressAgent}, "roots": ca.PEM(),
			"paths": []string{"GET /*.git/info/refs?service=git-upload-pack", "POST /*.git/git-upload-pack",
				"GET /work.git/info/refs?service=git-receive-pack", "POST /work.git/git-receive-pack"},
			"credential": map[string]string{"basicUser": "x-access-token", "secret": strings.TrimPrefix(gitTokenConfig, "flock:")}},
		{"host": pypiHost, "port": gitRemotePort, "agents": []string{egressAgent}, "roots": ca.PEM(), "paths": []string{"/simple/**", "/files/**"},
			"budget": map[string]any{"bytes": pypiBudget, "window": "day"}},
		{"host": goproxyHost, "port": gitRemotePort, "agents": []string{egressAgent}, "roots": ca.PEM()},
		{"host": inPoolName, "port": inPoolTunnelPort, "tunnel": true, "agents": []string{"agent-1"}},
	}
	b, _ := json.Marshal(rules)
	return string(b)
}

// startGitRemote makes "the internet", runs gitremote on it (in the
// Debian image the agents' own image starts from: it has git) and joins
// the gateway to it.
func (f *flockUnderTest) startGitRemote(ctx context.Context, work string) error {
	dir := filepath.Join(work, "gitremote")
	if err := goBuild(filepath.Join(dir, "gitremote"), "./tests/e2e/gitremote"); err != nil {
		return err
	}
	df := "FROM " + toolsImage + "\nCOPY gitremote /gitremote\nLABEL " + replay.RunLabel + "=1\nENTRYPOINT [\"/gitremote\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	img, err := f.engine.Build(ctx, dir, "Dockerfile", "", "ai-flock/e2e-gitremote:latest", nil, nil)
	if err != nil {
		return err
	}
	netID, err := f.engine.CreateNetwork(ctx, map[string]any{
		"Name": internetNet, "Driver": "bridge", "Labels": map[string]string{replay.RunLabel: "1"},
		"IPAM": map[string]any{"Config": []map[string]any{{"Subnet": internetSubnet, "Gateway": "203.0.113.1"}}},
	})
	if err != nil {
		return fmt.Errorf("the internet network: %w", err)
	}
	tmpfs := "rw,noexec,nosuid,nodev,size=16m,uid=65534,gid=65534,mode=0700"
	id, err := f.engine.CreateContainer(ctx, gitRemoteName, map[string]any{
		"Image": img,
		"User":  "65534:65534",
		"Env": []string{fmt.Sprintf("GITREMOTE_ADDR=:%d", gitRemotePort), "GITREMOTE_CA_SEED=" + hex.EncodeToString(gitRemoteSeed),
			"GITREMOTE_PYPI_HOST=" + pypiHost, "GITREMOTE_GOPROXY_HOST=" + goproxyHost,
			"GITREMOTE_TOKEN=" + gitToken, "GITREMOTE_ROOT=/srv/git", "GITREMOTE_MARKER=" + gitMarker, "HOME=/tmp"},
		"Labels": map[string]string{replay.RunLabel: "1"},
		"HostConfig": map[string]any{
			"NetworkMode": internetNet, "ReadonlyRootfs": true, "CapDrop": []string{"ALL"},
			"SecurityOpt": []string{"no-new-privileges:true"}, "Memory": 128 << 20,
			"Tmpfs": map[string]string{"/srv/git": tmpfs, "/tmp": tmpfs},
		},
		"NetworkingConfig": map[string]any{"EndpointsConfig": map[string]any{
			internetNet: map[string]any{"IPAMConfig": map[string]any{"IPv4Address": gitRemoteIP}, "Aliases": []string{gitRemoteHost, pypiHost, goproxyHost}},
		}},
	})
	if err != nil {
		return err
	}
	if err := f.engine.Start(ctx, id); err != nil {
		return err
	}
	if err := f.engine.ConnectNetwork(ctx, netID, f.name+"-gateway", map[string]any{}); err != nil {
		return fmt.Errorf("joining the gateway to the internet: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs, _ := f.engine.Logs(ctx, gitRemoteName, 0)
		if c, err := f.engine.Inspect(ctx, id); err == nil && c["State"].(map[string]any)["Running"] != true {
			return fmt.Errorf("gitremote stopped: %s", logs)
		}
		if remoteListening(ctx, f) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gitremote does not answer: %s", logs)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// remoteListening: gitremote answers its readiness path on its own
// loopback; it listens once the repository is seeded.
func remoteListening(ctx context.Context, f *flockUnderTest) bool {
	res, err := f.engine.Exec(ctx, gitRemoteName, []string{"curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", fmt.Sprintf("https://127.0.0.1:%d/_ready", gitRemotePort)})
	return err == nil && res.ExitCode == 0 && strings.TrimSpace(res.Stdout) == "204"
}

func (f *flockUnderTest) stopGitRemote(ctx context.Context) error {
	if err := f.engine.Remove(ctx, gitRemoteName); err != nil && !replay.IsNotFound(err) {
		return err
	}
	if err := f.engine.RemoveImage(ctx, "ai-flock/e2e-gitremote:latest"); err != nil && !replay.IsNotFound(err) {
		return err
	}
	return nil
}

// removeInternet, once the gateway is gone.
func (f *flockUnderTest) removeInternet(ctx context.Context) error {
	if err := f.engine.RemoveNetwork(ctx, internetNet); err != nil && !replay.IsNotFound(err) {
		return err
	}
	return nil
}

// remoteSaw is every request gitremote logged.
func remoteSaw(t *testing.T) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logs, err := fut.engine.Logs(ctx, gitRemoteName, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(l)), &m) == nil && m["method"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// Real git and curl in agent-6, configured by nothing but the environment
// the stack gave it (the proxy variables and the CA bundle the runtime
// wrote): a clone through the broker works with the credential the gateway
// put in; a push is refused by the gateway and never reaches the remote; a
// credential the agent sends is replaced; a refusal names the agent, host,
// method, path and the rule that would allow it; the remote is unreachable
// around the gateway. agent-2, with no rule, is refused; agent-1's tunnel
// to a name resolving inside the flock's pool is refused as private.
func TestEgressBroker(t *testing.T) {
	skipUnderGVisor(t, gatewayFunction)
	needGateway(t)
	_, js, rs := jsResults(t)
	sh := func(agent, tag, script string) protocol.Result {
		t.Helper()
		id := taskID(t, tag)
		publish(t, js, protocol.TaskSubject(agent), protocol.Task{ID: id, Kind: protocol.KindExec, Command: "sh", Args: []string{"-c", script}})
		got := rs.collect(t, 90*time.Second, func(m map[string][]protocol.Result) bool { return len(m[id]) > 0 })
		return got[id][0]
	}
	repo := fmt.Sprintf("https://%s:%d/repo.git", gitRemoteHost, gitRemotePort)

	r := sh(egressAgent, "egress-clone", "git clone -q "+repo+" clone && cat clone/README")
	if !r.OK() || !strings.Contains(r.Stdout, gitMarker) {
		t.Fatalf("git clone through the broker: %+v", r)
	}
	r = sh(egressAgent, "egress-push", "git clone -q "+repo+" c && cd c && echo more >> README && "+
		"git -c user.name=a -c user.email=a@e2e.example commit -qam change && git push origin main")
	if r.OK() || !strings.Contains(r.Stderr, "403") {
		t.Errorf("git push: %+v, want refused with 403", r)
	}
	// The repository the rule lets agent-6 push to: the push lands.
	work := fmt.Sprintf("https://%s:%d/work.git", gitRemoteHost, gitRemotePort)
	r = sh(egressAgent, "egress-push-allowed", "git clone -q "+work+" w && cd w && echo more >> README && "+
		"git -c user.name=a -c user.email=a@e2e.example commit -qam change && git push -q origin main && git ls-remote origin main")
	if !r.OK() {
		t.Errorf("git push to work.git, which the rule allows: %+v", r)
	}
	// The go command, through GOPROXY at the fixture (its module cache in
	// the agent's own directory); pip, from a simple index.
	goroot := installGo(t, egressAgent)
	r = sh(egressAgent, "egress-go", "GOROOT="+goroot+" GOPROXY=https://"+goproxyHost+fmt.Sprintf(":%d", gitRemotePort)+
		" GOPATH=$PWD/gopath GOCACHE=$PWD/gocache GOSUMDB=off GOTOOLCHAIN=local GOFLAGS=-modcacherw "+goroot+"/bin/go mod download -json example.com/flockdemo@v1.0.0")
	if !r.OK() || !strings.Contains(r.Stdout, `"Zip"`) || strings.Contains(r.Stdout, `"Error"`) {
		t.Errorf("go mod download through the broker: %+v", r)
	}
	r = sh(egressAgent, "egress-pip", "python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q "+
		"--index-url https://"+pypiHost+fmt.Sprintf(":%d", gitRemotePort)+"/simple/ -d dl flockdemo && ls dl")
	if !r.OK() || !strings.Contains(r.Stdout, "flockdemo-1.0-py3-none-any.whl") {
		t.Errorf("pip download through the broker: %+v", r)
	}
	// curl, the agent's own (wrong) credential: the gateway replaces it,
	// so the remote, which takes only the operator's, answers.
	r = sh(egressAgent, "egress-curl", "curl -sS -o /dev/null -w '%{http_code}' -u x-access-token:the-agents-guess '"+repo+"/info/refs?service=git-upload-pack'")
	if !r.OK() || strings.TrimSpace(r.Stdout) != "200" {
		t.Errorf("curl with the agent's own credential: %+v, want 200", r)
	}
	r = sh(egressAgent, "egress-refusal", "curl -sS -w '\\n%{http_code}' '"+repo+"/info/refs?service=git-receive-pack'")
	for _, want := range []string{`"agent":"` + egressAgent + `"`, `"host":"` + gitRemoteHost, `"method":"GET"`, `/repo.git/info/refs`, `"suggest"`, "403"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the refusal lacks %s: %+v", want, r)
		}
	}
	// Around the gateway: no route (and no name).
	r = sh(egressAgent, "egress-direct", fmt.Sprintf("curl -sS --max-time 5 --noproxy '*' --resolve %s:%d:%s https://%s:%d/", gitRemoteHost, gitRemotePort, gitRemoteIP, gitRemoteHost, gitRemotePort))
	if r.OK() {
		t.Errorf("the remote reached around the gateway: %+v", r)
	}
	pushed, pkgs := false, map[string]bool{}
	for _, req := range remoteSaw(t) {
		if req["host"] != gitRemoteHost {
			pkgs[fmt.Sprint(req["host"])] = true
			continue
		}
		path := fmt.Sprint(req["path"], req["query"])
		if strings.Contains(path, "receive-pack") && strings.HasPrefix(path, "/repo.git/") {
			t.Errorf("a push to repo.git reached the remote: %v", req)
		}
		pushed = pushed || req["method"] == "POST" && req["path"] == "/work.git/git-receive-pack"
		if req["authorized"] != true {
			t.Errorf("the remote got a request without the operator's credential: %v", req)
		}
	}
	if !pushed || !pkgs[pypiHost] || !pkgs[goproxyHost] {
		t.Errorf("the remote saw the push to work.git %v, the index %v, the module proxy %v", pushed, pkgs[pypiHost], pkgs[goproxyHost])
	}
	if n := len(remoteSaw(t)); n < 3 {
		t.Errorf("the remote saw %d requests, want the clones' and curl's", n)
	}
	// The agent never held the credential.
	for _, e := range containerEnv(t, container(egressAgent)) {
		if strings.Contains(e, gitToken) {
			t.Errorf("%s's environment holds the egress credential", egressAgent)
		}
	}
	// agent-2 has no rule for the remote; agent-1's tunnel resolves into the
	// flock's pool.
	gw2 := strings.TrimPrefix(gatewayURL(t, "agent-2"), "http://")
	if out := mustFail(t, "agent-2", "connect", gw2, fmt.Sprintf("%s:%d", gitRemoteHost, gitRemotePort)); status(out) != "403" || !strings.Contains(out, "connect_refused") {
		t.Errorf("agent-2 CONNECT to the remote: %q, want 403 connect_refused", out)
	}
	gw1 := strings.TrimPrefix(gatewayURL(t, "agent-1"), "http://")
	if out := mustFail(t, "agent-1", "connect", gw1, fmt.Sprintf("%s:%d", inPoolName, inPoolTunnelPort)); status(out) != "403" || !strings.Contains(out, "private_address") {
		t.Errorf("agent-1's tunnel to a name inside the pool: %q, want 403 private_address", out)
	}

	// On record: one audit entry per connection, the push's refusal among
	// them (what `flock-agent egress --suggest` reads), no query string.
	cl := operatorClient(t)
	ctx := testContext(t, 60*time.Second)
	host := fmt.Sprintf("%s:%d", gitRemoteHost, gitRemotePort)
	var brokered, refusedPush int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && (brokered < 3 || refusedPush == 0); time.Sleep(500 * time.Millisecond) {
		brokered, refusedPush = 0, 0
		err := audit.Each(ctx, cl.JetStream(), audit.Filter{Agent: egressAgent, Kind: protocol.AuditEgress}, func(_ uint64, raw []byte, e protocol.AuditEntry) error {
			if strings.Contains(string(raw), "service=") || strings.Contains(string(raw), gitToken) {
				t.Errorf("an egress entry holds a query string or the credential: %s", raw)
			}
			if e.What == host && e.Outcome == protocol.EgressBrokered && e.Who == protocol.GatewayUser {
				brokered++
				if e.Refused > 0 && strings.Contains(e.Refusal, "/repo.git/info/refs") {
					refusedPush++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read the trail: %v", err)
		}
	}
	if brokered < 3 || refusedPush == 0 {
		t.Errorf("the trail holds %d brokered connections of %s to %s (want the clones', curl's and the push's), %d with the push's refusal", brokered, egressAgent, host, refusedPush)
	}
	// What the operator reads: the hosts, the push's refusal, and the
	// index's byte budget named by its rule, the pip download charged.
	code, out, errOut := runCLI(t, need(t), "egress", "--agent", egressAgent)
	pypi := fmt.Sprintf("%s:%d", pypiHost, gitRemotePort)
	budget := regexp.MustCompile(`budget: ` + egressAgent + ` ` + regexp.QuoteMeta(pypi) + `: ([0-9]+) of ` + fmt.Sprint(pypiBudget) + ` bytes \(day, until `)
	m := budget.FindStringSubmatch(out)
	if code != cli.ExitOK || !strings.Contains(out, "refused: "+egressAgent+" "+host+" GET /repo.git/info/refs") || m == nil || m[1] == "0" {
		t.Errorf("flock-agent egress: exit %d, want the refused push and %s's budget charged:\n%s%s", code, pypi, out, errOut)
	}
}

// pypiBudget is the index rule's byte budget a day.
const pypiBudget = 1 << 30

// agent-1 floods the gateway with CONNECTs to names of its own choosing,
// a new one each time, for 15 s: each is refused (403, or 429 past its
// places in flight), agent-2's model calls keep their latency, and the
// flock's metrics grow no series per name (labelled by rule: "none").
func TestHostileEgressFlood(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	f := needGateway(t)
	a1, a2 := f.agents[0], f.agents[1]
	base50, _ := baselineOf(t, a2, 20)
	gw1 := strings.TrimPrefix(gatewayURL(t, a1), "http://")
	done := probeAsync(a1, 2*time.Minute, "connect-flood", gw1, "16", "15")
	time.Sleep(4 * time.Second)
	p50, _, bad := latencyOf(t, a2, 20)
	r := <-done
	if r.err != nil || r.code != 0 {
		t.Fatalf("probe: exit %d %v %q", r.code, r.err, r.out)
	}
	var counts map[string]int
	if err := json.Unmarshal([]byte(lastLine(r.out)), &counts); err != nil {
		t.Fatalf("probe said %q: %v", r.out, err)
	}
	t.Logf("agent-1's CONNECT flood: %v; agent-2 alone p50 %s, meanwhile %s", counts, base50, p50)
	if counts["403"] < 500 {
		t.Errorf("agent-1 was refused only %d CONNECTs: the flood was not made (%v)", counts["403"], counts)
	}
	for status, n := range counts {
		if status != "403" && status != "429" && n > 0 {
			t.Errorf("%d CONNECTs got %s, want each refused (403, or 429 past the cap in flight)", n, status)
		}
	}
	if bad != 0 {
		t.Errorf("%d of agent-2's model calls failed during the flood", bad)
	}
	if p50 > 10*base50+50*time.Millisecond {
		t.Errorf("agent-2's median went from %s to %s during the flood", base50, p50)
	}
	// The metrics: agent-1's refused connections counted under rule
	// "none", no series naming any host it chose.
	var body string
	testkit.WaitFor(t, 20*time.Second, "agent-1's refused connections in the metrics", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", protocol.MetricsPort))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, `flock_egress_connections_total{agent="agent-1",kind="refused",rule="none"}`)
	})
	series := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "flock_egress_") && strings.Contains(l, `agent="agent-1"`) {
			series++
		}
		if strings.Contains(l, "flood.example") {
			t.Fatalf("a metric names a host agent-1 chose: %s", l)
		}
	}
	if series > 6 {
		t.Errorf("agent-1 has %d egress series after the flood: its names grew them", series)
	}
	if res, err := f.engine.Exec(context.Background(), f.name+"-gateway", []string{"/flock-gateway", "health"}); err != nil || res.ExitCode != 0 {
		t.Errorf("the gateway is not healthy after the flood: %+v %v", res, err)
	}
}

// installGo puts the go command (the binary the suite runs with, its
// VERSION and go.env: enough for go mod download) in agent's own
// directory, owned by the agent, and returns its GOROOT there.
func installGo(t *testing.T, agent string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src := strings.TrimSpace(string(out))
	dst := filepath.Join(fut.sharedRoot, "agents", agent, ".go")
	uid := fut.uids[agent]
	for _, f := range []string{"bin/go", "VERSION", "go.env"} {
		raw, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, raw, 0o755); err != nil {
			t.Fatal(err)
		}
		for d := p; d != filepath.Dir(dst); d = filepath.Dir(d) {
			if err := os.Chown(d, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return "/shared/agents/" + agent + "/.go"
}
