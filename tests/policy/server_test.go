package policy_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ai-flock/ai-flock/infra/policy/pack"
	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/tests/capture"

	"github.com/ai-flock/ai-flock/tests/testkit"
)

// startPack builds infra/policy the way the Go language host does (`go build`
// in the pack's directory), starts it, and connects to the analyzer it serves.
func startPack(t *testing.T) pulumirpc.AnalyzerClient {
	t.Helper()
	dir := capture.ProjectFile(t, "infra", "policy")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the pack is built with the go command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "ai-flock-policy")
	build := exec.Command(goBin, "build", "-o", bin)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}

	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// The analyzer protocol: the plugin prints the port it listens on.
	portLine := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		portLine <- strings.TrimSpace(line)
	}()
	var port int
	select {
	case line := <-portLine:
		if port, err = strconv.Atoi(line); err != nil {
			t.Fatalf("the pack printed %q, not its port", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pack did not print its port within 30s")
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := pulumirpc.NewAnalyzerClient(conn)

	ctx := context.Background()
	if _, err := client.Handshake(ctx, &pulumirpc.AnalyzerHandshakeRequest{RootDirectory: &dir, ProgramDirectory: &dir}); err != nil {
		t.Fatalf("Handshake: %v", err)
	}
	cfg, err := capture.StackConfig("dev")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.ConfigureStack(ctx, &pulumirpc.AnalyzerStackConfigureRequest{
		Stack: "dev", Project: "ai-flock", DryRun: true, Config: cfg,
	}); err != nil {
		t.Fatalf("ConfigureStack: %v", err)
	}
	return client
}

var marshal = plugin.MarshalOptions{KeepSecrets: true, KeepUnknowns: true, KeepResources: true, KeepOutputValues: true}

// diagnostic is one violation as the engine receives it.
type diagnostic struct {
	policy, urn, message string
	level                pulumirpc.EnforcementLevel
}

// analyze sends a stack through the analyzer as the engine does on a
// preview: Analyze for every resource, then AnalyzeStack.
func analyze(t *testing.T, client pulumirpc.AnalyzerClient, stack string, rs []capture.Resource) []diagnostic {
	t.Helper()
	ctx := context.Background()
	var ds []*pulumirpc.AnalyzeDiagnostic
	var all []*pulumirpc.AnalyzerResource
	for _, r := range rs {
		props, err := plugin.MarshalProperties(r.Inputs, marshal)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		urn := urnOf(stack, r)
		resp, err := client.Analyze(ctx, &pulumirpc.AnalyzeRequest{Type: r.Type, Name: r.Name, Urn: urn, Properties: props})
		if err != nil {
			t.Fatalf("Analyze %s: %v", urn, err)
		}
		ds = append(ds, resp.GetDiagnostics()...)
		all = append(all, &pulumirpc.AnalyzerResource{Type: r.Type, Name: r.Name, Urn: urn, Properties: props, Parent: r.Parent, Dependencies: r.Deps})
	}
	resp, err := client.AnalyzeStack(ctx, &pulumirpc.AnalyzeStackRequest{Resources: all})
	if err != nil {
		t.Fatalf("AnalyzeStack: %v", err)
	}
	ds = append(ds, resp.GetDiagnostics()...)
	var out []diagnostic
	for _, d := range ds {
		if d.GetPolicyPackName() != pack.Name || d.GetPolicyPackVersion() != pack.Version {
			t.Errorf("diagnostic from pack %s %s", d.GetPolicyPackName(), d.GetPolicyPackVersion())
		}
		out = append(out, diagnostic{d.GetPolicyName(), d.GetUrn(), d.GetMessage(), d.GetEnforcementLevel()})
	}
	return out
}

func rpcLevel(t testing.TB, l rules.Level) pulumirpc.EnforcementLevel {
	switch l {
	case rules.Mandatory:
		return pulumirpc.EnforcementLevel_MANDATORY
	case rules.Advisory:
		return pulumirpc.EnforcementLevel_ADVISORY
	}
	t.Fatalf("level %v", l)
	return 0
}

// TestAnalyzerServer runs the built pack as the Pulumi CLI does and speaks
// the analyzer protocol to it: it announces every policy at its level, the
// dev stack and the aws fixture pass, and every breaking fixture comes back
// as the engine's diagnostics, with the policy, the resource's URN, the
// level and the message.
func TestAnalyzerServer(t *testing.T) {
	testkit.SkipInShort(t, "slow: builds and starts the policy pack; make check runs it")
	client := startPack(t)
	ctx := context.Background()

	info, err := client.GetAnalyzerInfo(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatalf("GetAnalyzerInfo: %v", err)
	}
	if info.GetName() != pack.Name || info.GetVersion() != pack.Version {
		t.Errorf("analyzer %s %s", info.GetName(), info.GetVersion())
	}
	announced := map[string]pulumirpc.EnforcementLevel{}
	for _, p := range info.GetPolicies() {
		announced[p.GetName()] = p.GetEnforcementLevel()
	}
	byName := map[string]rules.Policy{}
	for _, p := range rules.All() {
		byName[p.Name] = p
		if lvl, ok := announced[p.Name]; !ok || lvl != rpcLevel(t, p.Level) {
			t.Errorf("%s: announced %v (present %v), want %v", p.Name, lvl, ok, p.Level)
		}
	}
	if len(announced) != len(byName) {
		t.Errorf("the analyzer announces %d policies, the registry has %d", len(announced), len(byName))
	}

	for _, s := range []struct {
		stack string
		rs    []capture.Resource
	}{{"dev", dev(t, 3)}, {"aws", awsStack(3)}, {"aws", awsCapture(t, 3)}} {
		if ds := analyze(t, client, s.stack, s.rs); len(ds) > 0 {
			t.Errorf("%s stack: the analyzer reports %v", s.stack, ds)
		}
	}

	for _, c := range breakCases() {
		t.Run(c.name(), func(t *testing.T) {
			rs := c.build(t)
			var want, got []string
			for _, v := range check(c.stack, rs) {
				// policyx prefixes the policy's description to the message.
				want = append(want, fmt.Sprintf("%s|%s|%v|%s\n%s", v.Policy, v.URN, rpcLevel(t, byName[v.Policy].Level), byName[v.Policy].Description, v.Message()))
			}
			for _, d := range analyze(t, client, c.stack, rs) {
				got = append(got, fmt.Sprintf("%s|%s|%v|%s", d.policy, d.urn, d.level, d.message))
			}
			sort.Strings(want)
			sort.Strings(got)
			if len(got) == 0 || strings.Join(got, "\n--\n") != strings.Join(want, "\n--\n") {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
			}
		})
	}
}
