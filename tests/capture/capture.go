// Package capture runs the flock's Pulumi program under the mock engine and
// records every resource it declares, with its inputs. The stack tests assert
// the isolation invariants over the capture, the policy tests run the policy
// pack over it, and the e2e suite replays it onto a real Docker engine.
package capture

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"gopkg.in/yaml.v3"

	"github.com/ai-flock/ai-flock/stacks"
)

// Resource is one declared resource.
type Resource struct {
	Type   string // e.g. docker:index/container:Container
	Name   string // logical name
	Custom bool
	Parent string // parent URN
	Deps   []string
	Inputs resource.PropertyMap
}

// Stack is everything one run of the program declared.
type Stack struct {
	Resources []Resource
	Outputs   map[string]Output
}

// Output is one stack output, resolved.
type Output struct {
	Value  any
	Secret bool
}

// Types of the resources the stacks declare.
const (
	TypeContainer = "docker:index/container:Container"
	TypeNetwork   = "docker:index/network:Network"
	TypeImage     = "docker:index/image:Image"
	TypeCommand   = "command:local:Command"
	TypeFlock     = "flock:docker:Flock"
	TypeStack     = "pulumi:pulumi:Stack"
)

// TestSecret is the flock:busSecret the captures use; never a real one.
const TestSecret = "test-only-bus-secret-0123456789abcdef0123456789abcdef"

// Config is stack configuration: keys like "flock:agentCount" mapped to
// their values as Pulumi passes them (objects and lists JSON-encoded).
type Config map[string]string

// run records what one run of the program declares.
type run struct {
	mu    sync.Mutex
	stack Stack
}

func (r *run) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	res := Resource{Type: args.TypeToken, Name: args.Name, Custom: args.Custom, Inputs: args.Inputs}
	if rpc := args.RegisterRPC; rpc != nil {
		res.Parent = rpc.GetParent()
		res.Deps = rpc.GetDependencies()
	}
	r.mu.Lock()
	r.stack.Resources = append(r.stack.Resources, res)
	r.mu.Unlock()

	state := args.Inputs.Copy()
	if args.TypeToken == TypeImage {
		// A local image's repoDigest is its image ID.
		state["repoDigest"] = resource.NewStringProperty(MockDigest(args.Name))
	}
	if ResourceMock != nil {
		ResourceMock(args, state)
	}
	return args.Name + "-id", state, nil
}

// MockDigest is the image ID the mocks give the image resource named name;
// the e2e replay swaps it for the ID of the image it really built.
func MockDigest(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (r *run) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return CallMock(args)
}

// ResourceMock, when set, adds what a provider would compute (ARNs, URLs)
// to a new resource's state. The aws stack's mocks set it (awsmocks.go).
var ResourceMock func(args pulumi.MockResourceArgs, state resource.PropertyMap)

// CallMock answers the provider functions (invokes) the stacks call.
// Replaced by the aws stack's mocks where needed.
var CallMock = func(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return nil, fmt.Errorf("capture: no mock for invoke %s", args.Token)
}

// Run runs the program with cfg (secret keys listed in secretKeys) and
// returns what it declared, or the program's error.
func Run(stackName string, cfg Config, secretKeys ...string) (*Stack, error) {
	return RunProgram(stackName, cfg, stacks.Run, secretKeys...)
}

// RunProgram runs program (the whole program, or one component declared by
// a test) under the mocks, and returns what it declared and exported. On
// the program's error it returns what was declared before it, with the
// error: an invalid configuration must have declared nothing.
func RunProgram(stackName string, cfg Config, program pulumi.RunFunc, secretKeys ...string) (*Stack, error) {
	r := &run{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		if err := program(ctx); err != nil {
			return err
		}
		r.stack.Outputs = map[string]Output{}
		for name, in := range ctx.GetCurrentExportMap() {
			res, err := internals.UnsafeAwaitOutput(ctx.Context(), pulumi.ToOutput(in))
			if err != nil {
				return fmt.Errorf("output %s: %w", name, err)
			}
			r.stack.Outputs[name] = Output{Value: res.Value, Secret: res.Secret}
		}
		return nil
	}, pulumi.WithMocks("ai-flock", stackName, r), func(info *pulumi.RunInfo) {
		info.Config = cfg
		info.ConfigSecretKeys = secretKeys
	})
	if err != nil {
		return &r.stack, err
	}
	return &r.stack, nil
}

// WithSecret adds the test bus secret to cfg and returns the secret keys.
func WithSecret(cfg Config) (Config, []string) {
	out := Config{"flock:busSecret": TestSecret}
	for k, v := range cfg {
		out[k] = v
	}
	return out, []string{"flock:busSecret"}
}

// RunDev captures the dev stack as Pulumi.dev.yaml declares it, with the
// given keys overriding or adding to its config (secretKeys among them are
// secrets, as `pulumi config set --secret` makes them).
func RunDev(overrides Config, secretKeys ...string) (*Stack, error) {
	return RunStack("dev", overrides, secretKeys...)
}

// RunStack captures stack as Pulumi.<stack>.yaml declares it, with the test
// bus secret and the given keys overriding or adding to its config (an empty
// value removes the key; secretKeys among them are secrets).
func RunStack(stack string, overrides Config, secretKeys ...string) (*Stack, error) {
	cfg, err := StackConfig(stack)
	if err != nil {
		return nil, err
	}
	for k, v := range overrides {
		if v == "" {
			delete(cfg, k) // an empty override removes the key
			continue
		}
		cfg[k] = v
	}
	cfg, secrets := WithSecret(cfg)
	return Run(stack, cfg, append(secrets, secretKeys...)...)
}

// StackConfig reads Pulumi.<stack>.yaml from the project root.
func StackConfig(stack string) (Config, error) {
	root, err := ProjectRoot()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, "Pulumi."+stack+".yaml"))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("Pulumi.%s.yaml: %w", stack, err)
	}
	cfg := Config{}
	for k, v := range doc.Config {
		if s, ok := v.(string); ok {
			cfg[k] = s
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("Pulumi.%s.yaml: %s: %w", stack, k, err)
		}
		cfg[k] = string(b)
	}
	return cfg, nil
}

// ProjectRoot finds the directory holding Pulumi.yaml above the working directory.
func ProjectRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "Pulumi.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("capture: no Pulumi.yaml above the working directory")
		}
		dir = parent
	}
}

// ProjectFile is the path of parts under the project's root (ProjectRoot);
// t fails if there is no root.
func ProjectFile(t testing.TB, parts ...string) string {
	t.Helper()
	root, err := ProjectRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// ByType returns the resources of one type, sorted by name.
func (s *Stack) ByType(t string) []Resource {
	var out []Resource
	for _, r := range s.Resources {
		if r.Type == t {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the resource of type t named name.
func (s *Stack) Get(t, name string) (Resource, bool) {
	for _, r := range s.Resources {
		if r.Type == t && r.Name == name {
			return r, true
		}
	}
	return Resource{}, false
}

// Plain returns the inputs as plain Go values (secrets unwrapped).
func (r Resource) Plain() map[string]any {
	return r.Inputs.Mappable()
}

// String is a string input ("" when absent or not a string).
func (r Resource) String(key string) string {
	v, ok := r.Inputs[resource.PropertyKey(key)]
	if !ok {
		return ""
	}
	if v.IsSecret() {
		v = v.SecretValue().Element
	}
	if v.IsString() {
		return v.StringValue()
	}
	return ""
}

// HasPrefix reports whether the resource's name starts with prefix.
func (r Resource) HasPrefix(prefix string) bool { return strings.HasPrefix(r.Name, prefix) }
