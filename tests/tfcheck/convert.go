package tfcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// Mode is how a value that comes from another resource is written.
type Mode int

const (
	// Preview writes a reference to another resource's output as a
	// reference (unknown until that resource exists), as `pulumi preview`
	// sees it: a validator meets only what is known at plan time.
	Preview Mode = iota
	// Apply writes every value as the mocks resolved it (IDs and ARNs in
	// AWS's shapes), as the provider meets them when it creates each
	// resource: every validator sees every value.
	Apply
)

// Config is a stack's aws resources in Terraform's JSON configuration: type,
// then name, then the resource's body.
type Config map[string]map[string]any

// Names are the Terraform names given to the captured resources.
type Names map[string]string // Pulumi type and name ("type::name") → "tftype.tfname"

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

// ref is a value the mocks gave some resource's output, and the Terraform
// expression for that output.
type ref struct{ value, expr string }

type converter struct {
	schema *Schema
	mode   Mode
	refs   []ref
	names  Names
	// unknowns are the non-aws resources (images, commands) whose outputs
	// an aws resource reads: each becomes a terraform_data whose id is
	// unknown until apply.
	unknowns map[string]bool
	errs     []string
}

// Convert writes every aws resource of s as Terraform configuration. A type
// or input it cannot map is an error naming it, never left out.
func Convert(s *capture.Stack, schema *Schema, mode Mode) (Config, Names, error) {
	c := &converter{schema: schema, mode: mode, names: Names{}, unknowns: map[string]bool{}}
	used := map[string]bool{}
	types := map[string]string{}
	for _, r := range s.Resources {
		if !strings.HasPrefix(r.Type, "aws:") {
			continue
		}
		t, err := TFType(r.Type, schema)
		if err != nil {
			c.errs = append(c.errs, err.Error())
			continue
		}
		types[r.Type+"::"+r.Name] = t
		n := tfName(r.Name)
		for i := 2; used[t+"."+n]; i++ {
			n = tfName(r.Name) + "_" + strconv.Itoa(i)
		}
		used[t+"."+n] = true
		c.names[r.Type+"::"+r.Name] = t + "." + n
	}
	c.collectRefs(s)
	out := Config{}
	for _, r := range s.Resources {
		addr, ok := c.names[r.Type+"::"+r.Name]
		if !ok {
			continue
		}
		t, n, _ := strings.Cut(addr, ".")
		body := c.block(r.Type+" "+r.Name, renamed(schemaOf(schema, t), renames[r.Type]), autoname(r, schemaOf(schema, t), renames[r.Type]))
		if out[t] == nil {
			out[t] = map[string]any{}
		}
		out[t][n] = body
	}
	for n := range c.unknowns {
		if out["terraform_data"] == nil {
			out["terraform_data"] = map[string]any{}
		}
		out["terraform_data"][n] = map[string]any{}
	}
	if len(c.errs) > 0 {
		sort.Strings(c.errs)
		return out, c.names, fmt.Errorf("tfcheck: %d inputs or types not mapped:\n  %s", len(c.errs), strings.Join(c.errs, "\n  "))
	}
	return out, c.names, nil
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

// collectRefs lists every output value the mocks gave a resource that
// another may read, with its expression: for an aws resource its id, its
// ARN and the outputs AWS computes; for any other its id (an image's digest
// too), which stands for an output unknown at preview.
func (c *converter) collectRefs(s *capture.Stack) {
	for _, r := range s.Resources {
		addr, ok := c.names[r.Type+"::"+r.Name]
		if !ok {
			if r.Type == capture.TypeStack || strings.HasPrefix(r.Type, "flock:") || strings.HasPrefix(r.Type, "pulumi:") {
				continue
			}
			n := "unknown_" + tfName(r.Name)
			expr := "terraform_data." + n + ".id"
			c.refs = append(c.refs, ref{capture.MockID(r.Name), expr}, ref{capture.MockDigest(r.Name), expr})
			continue
		}
		t, _, _ := strings.Cut(addr, ".")
		c.refs = append(c.refs, ref{capture.MockID(r.Name), addr + ".id"})
		if _, ok := schemaOf(c.schema, t).Attributes["arn"]; ok {
			c.refs = append(c.refs, ref{r.MockARN(), addr + ".arn"})
		}
		for _, out := range capture.AWSComputedOutputs(r) {
			attr := Snake(out.Name)
			if a, ok := schemaOf(c.schema, t).Attributes[attr]; ok && a.Computed {
				c.refs = append(c.refs, ref{out.Value, addr + "." + attr})
			}
		}
	}
	// Longest first: an ARN holds the ID it ends with.
	sort.SliceStable(c.refs, func(i, j int) bool { return len(c.refs[i].value) > len(c.refs[j].value) })
}

func (c *converter) fail(path, format string, args ...any) {
	c.errs = append(c.errs, path+": "+fmt.Sprintf(format, args...))
}

// block converts a resource's (or a nested block's) inputs.
func (c *converter) block(path string, b Block, m resource.PropertyMap) map[string]any {
	out := map[string]any{}
	for _, k := range m.StableKeys() {
		v := plain(m[k])
		if v.IsNull() {
			continue
		}
		name := string(k)
		tf, attr, bt := b.Field(name)
		p := path + "." + name
		switch {
		case attr != nil:
			if !attr.Optional && !attr.Required {
				c.fail(p, "%s is an output of the provider (computed only), not an input", tf)
				continue
			}
			out[tf] = c.value(p, attr.Type, v)
		case bt != nil:
			var items []resource.PropertyValue
			if v.IsArray() {
				items = v.ArrayValue()
			} else {
				items = []resource.PropertyValue{v}
			}
			var list []any
			for i, it := range items {
				it = plain(it)
				if !it.IsObject() {
					c.fail(fmt.Sprintf("%s[%d]", p, i), "block %s needs an object, got %s", tf, it.TypeString())
					continue
				}
				list = append(list, c.block(fmt.Sprintf("%s[%d]", p, i), bt.Block, it.ObjectValue()))
			}
			if bt.NestingMode == "single" || bt.NestingMode == "group" {
				if len(list) > 0 {
					out[tf] = list[0]
				}
			} else {
				out[tf] = list
			}
		default:
			c.fail(p, "no attribute or block %s", strings.Join(candidates(name), " or "))
		}
	}
	return out
}

// plain unwraps secrets and resolved outputs.
func plain(v resource.PropertyValue) resource.PropertyValue {
	for {
		switch {
		case v.IsSecret():
			v = v.SecretValue().Element
		case v.IsOutput() && v.OutputValue().Known:
			v = v.OutputValue().Element
		default:
			return v
		}
	}
}

// value converts one attribute's value to its Terraform type.
func (c *converter) value(path string, typ json.RawMessage, v resource.PropertyValue) any {
	v = plain(v)
	if v.IsComputed() || v.IsOutput() {
		c.fail(path, "an unknown value: the mocks resolve every input")
		return nil
	}
	var simple string
	if json.Unmarshal(typ, &simple) == nil {
		switch {
		case v.IsString():
			return c.str(v.StringValue())
		case v.IsNumber():
			return v.NumberValue()
		case v.IsBool():
			return v.BoolValue()
		case simple == "dynamic" || simple == "string":
			// An object or list where Terraform takes a string: JSON, as
			// the bridge sends it.
			b, _ := json.Marshal(v.Mappable())
			return c.str(string(b))
		}
		c.fail(path, "a %s where terraform wants a %s", v.TypeString(), simple)
		return nil
	}
	var complex []json.RawMessage
	if json.Unmarshal(typ, &complex) != nil || len(complex) != 2 {
		c.fail(path, "an attribute type terraform printed as %s", typ)
		return nil
	}
	var kind string
	_ = json.Unmarshal(complex[0], &kind)
	switch kind {
	case "list", "set":
		if !v.IsArray() {
			c.fail(path, "a %s where terraform wants a %s", v.TypeString(), kind)
			return nil
		}
		out := []any{}
		for i, e := range v.ArrayValue() {
			out = append(out, c.value(fmt.Sprintf("%s[%d]", path, i), complex[1], e))
		}
		return out
	case "map":
		if !v.IsObject() {
			c.fail(path, "a %s where terraform wants a map", v.TypeString())
			return nil
		}
		out := map[string]any{}
		for k, e := range v.ObjectValue() { // a map's keys are data (tags): kept as they are
			out[string(k)] = c.value(path+"."+string(k), complex[1], e)
		}
		return out
	case "object":
		var attrs map[string]json.RawMessage
		_ = json.Unmarshal(complex[1], &attrs)
		if !v.IsObject() {
			c.fail(path, "a %s where terraform wants an object", v.TypeString())
			return nil
		}
		out := map[string]any{}
		for _, k := range v.ObjectValue().StableKeys() {
			found := false
			for _, cand := range candidates(string(k)) {
				if t, ok := attrs[cand]; ok {
					out[cand] = c.value(path+"."+string(k), t, v.ObjectValue()[k])
					found = true
					break
				}
			}
			if !found {
				c.fail(path+"."+string(k), "no attribute %s in the object", strings.Join(candidates(string(k)), " or "))
			}
		}
		return out
	}
	c.fail(path, "an attribute type terraform printed as %s", typ)
	return nil
}

// str writes a string as a Terraform template: its literal "${" and "%{"
// escaped, and under Preview each value the mocks gave another resource's
// output replaced by a reference to that output.
func (c *converter) str(s string) string {
	if c.mode == Apply {
		return escape(s)
	}
	type hit struct {
		at, end int
		expr    string
	}
	var hits []hit
	taken := make([]bool, len(s))
	for _, r := range c.refs {
		if r.value == "" {
			continue
		}
		for off := 0; off < len(s); {
			i := strings.Index(s[off:], r.value)
			if i < 0 {
				break
			}
			i += off
			j := i + len(r.value)
			off = i + 1
			if !boundary(s, i, j) || anyTaken(taken[i:j]) {
				continue
			}
			for k := i; k < j; k++ {
				taken[k] = true
			}
			hits = append(hits, hit{i, j, r.expr})
			if strings.HasPrefix(r.expr, "terraform_data.") {
				c.unknowns[strings.Split(r.expr, ".")[1]] = true
			}
		}
	}
	sort.Slice(hits, func(a, b int) bool { return hits[a].at < hits[b].at })
	var b strings.Builder
	prev := 0
	for _, h := range hits {
		b.WriteString(escape(s[prev:h.at]))
		b.WriteString("${" + h.expr + "}")
		prev = h.end
	}
	b.WriteString(escape(s[prev:]))
	return b.String()
}

func anyTaken(t []bool) bool {
	for _, x := range t {
		if x {
			return true
		}
	}
	return false
}

// boundary: s[i:j] is not part of a longer name.
func boundary(s string, i, j int) bool {
	word := func(b byte) bool {
		return b == '-' || b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	return (i == 0 || !word(s[i-1])) && (j == len(s) || !word(s[j]))
}

// escape keeps a literal string literal in a Terraform template.
func escape(s string) string {
	return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(s)
}
