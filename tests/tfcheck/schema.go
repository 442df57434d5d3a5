// Package tfcheck runs the real AWS provider's own checks over the aws
// stack, offline: every aws resource the stack declares (captured under
// Pulumi's mock engine, tests/capture) is written as Terraform's JSON
// configuration and planned by terraform with terraform-provider-aws, the
// code pulumi-aws wraps, with no call to AWS (fake keys, every lookup
// skipped). The plan runs the provider's schema checks, its validators and
// its plan-time checks; a refusal comes back in the provider's own words.
package tfcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// ProviderVersion is the terraform-provider-aws release the layer plans
// with: the one pulumi-aws v6.83 wraps (see the package's README).
const ProviderVersion = "5.100.0"

// ErrNoTerraform: terraform, or the provider plugin, is not on this machine.
var ErrNoTerraform = errors.New("tfcheck: no terraform with terraform-provider-aws " + ProviderVersion)

// Schema is the provider's schema, as `terraform providers schema -json`
// prints it: the resource types and, for each, its attributes and blocks.
type Schema struct {
	Resources map[string]Block
}

// Block is a resource's (or a nested block's) attributes and blocks.
type Block struct {
	Attributes map[string]Attribute `json:"attributes"`
	BlockTypes map[string]BlockType `json:"block_types"`
	renames    map[string]string    // a Pulumi input's snake spelling → the provider's name (Renamed)
}

// Attribute is one attribute: its type in Terraform's type syntax
// ("string", ["list","string"], ["map","string"], ["object",{…}]).
type Attribute struct {
	Type     json.RawMessage `json:"type"`
	Required bool            `json:"required"`
	Optional bool            `json:"optional"`
	Computed bool            `json:"computed"`
}

// BlockType is a nested block: how it nests (single, list, set) and its body.
type BlockType struct {
	NestingMode string `json:"nesting_mode"`
	Block       Block  `json:"block"`
	MaxItems    int    `json:"max_items"`
}

// Terraform is a working directory initialised with the provider, from
// which plans are made (each in a directory of its own sharing the plugin).
type Terraform struct {
	bin, dir string
	env      []string
	once     sync.Once
	schema   *Schema
	err      error
}

// PluginDir is where the provider plugin is looked for: FLOCK_TERRAFORM_PLUGIN_DIR,
// else the first of the usual local mirrors holding it ("" when none does:
// then terraform init asks the registry).
func PluginDir() string {
	if d := os.Getenv("FLOCK_TERRAFORM_PLUGIN_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	for _, d := range []string{
		filepath.Join(home, ".terraform.d", "plugins"),
		filepath.Join(home, ".local", "share", "terraform", "plugins"),
		"/usr/local/share/terraform/plugins", "/usr/share/terraform/plugins", "/opt/tf-plugins",
	} {
		if m, _ := filepath.Glob(filepath.Join(d, "registry.terraform.io", "hashicorp", "aws", ProviderVersion, "*", "terraform-provider-aws_*")); len(m) > 0 {
			return d
		}
	}
	return ""
}

// provider is the provider block of every plan: fake keys and every call
// the provider would make before planning skipped, so nothing reaches AWS.
func provider(region string) map[string]any {
	return map[string]any{"aws": map[string]any{
		"region": region, "access_key": "AKIAIOSFODNN7EXAMPLE", "secret_key": "fake-secret-key-for-an-offline-plan",
		"skip_credentials_validation": true, "skip_requesting_account_id": true,
		"skip_metadata_api_check": true, "skip_region_validation": true,
	}}
}

// New initialises a working directory under dir with the provider.
func New(ctx context.Context, dir string) (*Terraform, error) {
	bin, err := exec.LookPath("terraform")
	if err != nil {
		return nil, fmt.Errorf("%w: terraform is not on PATH", ErrNoTerraform)
	}
	tf := &Terraform{bin: bin, dir: filepath.Join(dir, "init"),
		env: append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")}
	if err := os.MkdirAll(tf.dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(tf.dir, "main.tf.json"), config(provider("eu-west-1"), nil)); err != nil {
		return nil, err
	}
	args := []string{"init", "-input=false", "-no-color", "-backend=false"}
	if d := PluginDir(); d != "" {
		args = append(args, "-plugin-dir="+d)
	}
	if out, err := tf.run(ctx, tf.dir, args...); err != nil {
		return nil, fmt.Errorf("%w: terraform init: %v\n%s", ErrNoTerraform, err, out)
	}
	return tf, nil
}

func (tf *Terraform) run(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, tf.bin, args...)
	cmd.Dir, cmd.Env = dir, tf.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Schema is the provider's schema (read once).
func (tf *Terraform) Schema(ctx context.Context) (*Schema, error) {
	tf.once.Do(func() {
		cmd := exec.CommandContext(ctx, tf.bin, "providers", "schema", "-json")
		cmd.Dir, cmd.Env = tf.dir, tf.env
		raw, err := cmd.Output()
		if err != nil {
			tf.err = fmt.Errorf("terraform providers schema: %w", err)
			return
		}
		var doc struct {
			Schemas map[string]struct {
				Resources map[string]struct {
					Block Block `json:"block"`
				} `json:"resource_schemas"`
			} `json:"provider_schemas"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			tf.err = fmt.Errorf("terraform providers schema: %w", err)
			return
		}
		p, ok := doc.Schemas["registry.terraform.io/hashicorp/aws"]
		if !ok {
			tf.err = errors.New("terraform providers schema: no hashicorp/aws")
			return
		}
		tf.schema = &Schema{Resources: map[string]Block{}}
		for name, r := range p.Resources {
			tf.schema.Resources[name] = r.Block
		}
	})
	return tf.schema, tf.err
}

// Plan plans cfg (a Terraform JSON configuration's resources) in a
// directory of its own named name, and returns the provider's refusals
// (nil when the plan passes). An error is terraform failing otherwise.
func (tf *Terraform) Plan(ctx context.Context, name, region string, resources map[string]map[string]any) ([]string, string, error) {
	dir := filepath.Join(filepath.Dir(tf.dir), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	for _, f := range []string{".terraform", ".terraform.lock.hcl"} {
		_ = os.Remove(filepath.Join(dir, f))
		if err := os.Symlink(filepath.Join(tf.dir, f), filepath.Join(dir, f)); err != nil {
			return nil, "", err
		}
	}
	if err := writeJSON(filepath.Join(dir, "main.tf.json"), config(provider(region), resources)); err != nil {
		return nil, "", err
	}
	out, err := tf.run(ctx, dir, "plan", "-input=false", "-no-color", "-refresh=false", "-lock=false")
	if err == nil {
		return nil, out, nil
	}
	refusals := Refusals(out)
	if len(refusals) == 0 {
		return nil, out, fmt.Errorf("terraform plan: %v\n%s", err, out)
	}
	return refusals, out, nil
}

// Refusals are the errors of terraform's output, each with its detail
// and the resource it names ("Missing required argument: The argument
// "name" is required… (aws_ecs_cluster.x)").
func Refusals(out string) []string {
	var errs []string
	lines := strings.Split(out, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(strings.TrimLeft(lines[i], "│╷╵ "))
		if !strings.HasPrefix(l, "Error: ") {
			continue
		}
		msg, addr := strings.TrimPrefix(l, "Error: "), ""
		for i+1 < len(lines) {
			n := strings.TrimSpace(strings.TrimLeft(lines[i+1], "│╷╵ "))
			if strings.HasPrefix(n, "Error: ") {
				break
			}
			i++
			switch {
			case n == "", excerpt.MatchString(n):
			case strings.HasPrefix(n, "with "):
				addr = strings.TrimSuffix(strings.TrimPrefix(n, "with "), ",")
			case strings.HasPrefix(n, "on "):
				if m := inResource.FindStringSubmatch(n); m != nil && addr == "" {
					addr = m[1]
				}
			default:
				msg += ": " + n
			}
		}
		if addr != "" {
			msg += " (" + addr + ")"
		}
		errs = append(errs, msg)
	}
	return errs
}

var (
	excerpt    = regexp.MustCompile(`^\d+:`)
	inResource = regexp.MustCompile(`in resource\.([^:]+):`)
)

func config(provider map[string]any, resources map[string]map[string]any) map[string]any {
	c := map[string]any{
		"terraform": map[string]any{"required_providers": map[string]any{
			"aws": map[string]any{"source": "hashicorp/aws", "version": ProviderVersion},
		}},
		"provider": provider,
	}
	if len(resources) > 0 {
		c["resource"] = resources
	}
	return c
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
