package tfcheck

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

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
