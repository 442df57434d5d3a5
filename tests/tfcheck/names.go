package tfcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// moduleOf are pulumi-aws modules whose Terraform prefix is spelt otherwise.
var moduleOf = map[string]string{"servicediscovery": "service_discovery"}

// TFType is the Terraform resource type of a pulumi-aws type token
// (aws:ecs/taskDefinition:TaskDefinition is aws_ecs_task_definition,
// aws:ec2/vpc:Vpc aws_vpc): the module-prefixed name where the provider has
// it, else the unprefixed one, as the bridge names them.
func TFType(token string, s *Schema) (string, error) {
	rest, ok := strings.CutPrefix(token, "aws:")
	mod, path, ok2 := strings.Cut(rest, "/")
	camel, _, ok3 := strings.Cut(path, ":")
	if !ok || !ok2 || !ok3 {
		return "", fmt.Errorf("%s: not a pulumi-aws resource type", token)
	}
	if m, ok := moduleOf[mod]; ok {
		mod = m
	}
	for _, t := range []string{"aws_" + mod + "_" + Snake(camel), "aws_" + Snake(camel)} {
		if _, ok := s.Resources[t]; ok {
			return t, nil
		}
	}
	return "", fmt.Errorf("%s: terraform-provider-aws %s has no resource aws_%s_%s nor aws_%s", token, ProviderVersion, mod, Snake(camel), Snake(camel))
}

// Snake is a Pulumi property name in Terraform's spelling: vpcId vpc_id,
// ipv6CidrBlock ipv6_cidr_block.
func Snake(camel string) string {
	var b strings.Builder
	for i, r := range camel {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// candidates are the Terraform names a Pulumi property name may stand for:
// its snake spelling, and the singular the bridge pluralised (a list block
// load_balancer is loadBalancers, capacity_provider_strategy
// capacityProviderStrategies).
func candidates(name string) []string {
	s := Snake(name)
	out := []string{s}
	switch {
	case strings.HasSuffix(s, "ies"):
		out = append(out, strings.TrimSuffix(s, "ies")+"y")
	case strings.HasSuffix(s, "ses"), strings.HasSuffix(s, "xes"):
		out = append(out, strings.TrimSuffix(s, "es"), strings.TrimSuffix(s, "s"))
	case strings.HasSuffix(s, "s"):
		out = append(out, strings.TrimSuffix(s, "s"))
	}
	return out
}

// Field is the Terraform attribute or block a Pulumi property of b is.
func (b Block) Field(name string) (tf string, attr *Attribute, block *BlockType) {
	for _, c := range candidates(name) {
		if r, ok := b.renames[c]; ok {
			c = r
		}
		if a, ok := b.Attributes[c]; ok {
			return c, &a, nil
		}
		if bt, ok := b.BlockTypes[c]; ok {
			return c, nil, &bt
		}
	}
	return "", nil, nil
}

func schemaOf(s *Schema, t string) Block { return s.Resources[t] }

// renames are the inputs pulumi-aws names otherwise than the provider,
// beyond the camelCase and plural spellings (Field): the SDK's own inputs
// find every one (TestTheMappingCoversTheSDKsInputs).
var renames = map[string]map[string]string{
	"aws:cloudwatch/metricAlarm:MetricAlarm": {"name": "alarm_name"},
}

// Renamed is b as pulumi-aws spells a resource's inputs: each renamed
// attribute under its Pulumi name.
func Renamed(b Block, token string) Block { return renamed(b, renames[token]) }

func renamed(b Block, r map[string]string) Block {
	if len(r) == 0 {
		return b
	}
	b.renames = map[string]string{}
	for pulumi, tf := range r {
		b.renames[Snake(pulumi)] = tf
	}
	return b
}

// autoname gives a resource the name Pulumi gives one the program leaves
// unnamed (its logical name, a dash and seven random characters; here a
// hash, so plans repeat), where the resource has a name to give and no
// namePrefix was set.
func autoname(r capture.Resource, b Block, ren map[string]string) resource.PropertyMap {
	if _, ok := r.Inputs["name"]; ok {
		return r.Inputs
	}
	if _, ok := r.Inputs["namePrefix"]; ok {
		return r.Inputs
	}
	tf := "name"
	if n, ok := ren["name"]; ok {
		tf = n
	}
	if a, ok := b.Attributes[tf]; !ok || !a.Optional && !a.Required {
		return r.Inputs
	}
	sum := sha256.Sum256([]byte(r.Type + r.Name))
	in := r.Inputs.Copy()
	in["name"] = resource.NewStringProperty(r.Name + "-" + hex.EncodeToString(sum[:])[:7])
	return in
}

var notName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// tfName is a Pulumi name as a Terraform name (letters, digits, _ and -,
// starting with a letter or _).
func tfName(name string) string {
	n := notName.ReplaceAllString(name, "_")
	if n == "" || !unicode.IsLetter(rune(n[0])) && n[0] != '_' {
		n = "r_" + n
	}
	return n
}
