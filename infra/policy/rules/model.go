// Package rules holds the AI Flock policies as plain Go: every rule is a
// function over a resource's properties as plain values (maps, slices,
// strings, numbers, bools), so tests call the rules directly on captured or
// hand-made resources, and the policy pack (infra/policy/pack) serves the very
// same functions to the Pulumi engine through policyx.
//
// The registry (All) lists every policy with its name, description and
// enforcement level; a policy that is not in the registry is not served.
package rules

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// Resource types the rules inspect besides the aws ones (infra/awsrules).
const (
	TypeContainer = "docker:index/container:Container"
	TypeNetwork   = "docker:index/network:Network"
	TypeCommand   = "command:local:Command"
)

// Unknown stands for a value the engine does not know yet: during a preview,
// outputs of resources that do not exist yet. A rule cannot judge an unknown
// value and skips it; `pulumi up` runs the rules again on the resolved inputs
// before the resource is created.
type Unknown struct{}

// Resource is one resource as the rules see it.
type Resource struct {
	Type string
	Name string // the logical name, as in the URN
	URN  string
	// Props are the resource's properties (inputs when validating one
	// resource, the resulting state when validating the stack) as plain
	// values: nil, bool, float64, string, []any, map[string]any or Unknown.
	// Secrets are unwrapped.
	Props map[string]any
	// Deps are the URNs this resource depends on (stack policies only).
	Deps []string
}

// FromPropertyMap turns engine properties into plain values.
func FromPropertyMap(m property.Map) map[string]any {
	out := make(map[string]any, m.Len())
	for k, v := range m.All {
		out[k] = plain(v)
	}
	return out
}

func plain(v property.Value) any {
	switch {
	case v.IsComputed():
		return Unknown{}
	case v.IsNull():
		return nil
	case v.IsBool():
		return v.AsBool()
	case v.IsNumber():
		return v.AsNumber()
	case v.IsString():
		return v.AsString()
	case v.IsArray():
		arr := v.AsArray()
		out := make([]any, 0, arr.Len())
		for _, e := range arr.All {
			out = append(out, plain(e))
		}
		return out
	case v.IsMap():
		return FromPropertyMap(v.AsMap())
	case v.IsResourceReference():
		ref := v.AsResourceReference()
		if id, ok := ref.IDString(); ok {
			return id
		}
		return string(ref.URN)
	default: // assets and archives: nothing a rule reads
		return nil
	}
}

// Finding is one broken rule on one resource, before the registry stamps
// it with the policy's name.
type Finding struct {
	Type, Name, URN string
	Problem         string // what is wrong, naming the offending value
	Fix             string // what to change
}

// Violation is a finding of a named policy.
type Violation struct {
	Policy string
	Finding
}

// Message is what users read: the rule, the resource, the problem and the fix.
func (v Violation) Message() string {
	return fmt.Sprintf("[%s] %s %q: %s. Fix: %s.", v.Policy, v.Type, v.Name,
		strings.TrimSuffix(v.Problem, "."), strings.TrimSuffix(v.Fix, "."))
}

func (r Resource) finding(fix, format string, a ...any) Finding {
	return Finding{Type: r.Type, Name: r.Name, URN: r.URN, Problem: fmt.Sprintf(format, a...), Fix: fix}
}

// mustBeTrue finds the input key unless it is true (or unknown: the engine
// knows it only at apply); problem shows the value found (%s).
func (r Resource) mustBeTrue(key, fix, problem string) []Finding {
	v := r.get(key)
	if isUnknown(v) || truthy(v) {
		return nil
	}
	return []Finding{r.finding(fix, problem, describe(v))}
}

// mustBePositive finds the input key unless it is a number above 0 (or
// unknown); problem shows the value found (%s).
func (r Resource) mustBePositive(key, fix, problem string) []Finding {
	v := r.get(key)
	if isUnknown(v) {
		return nil
	}
	if n, ok := number(v); ok && n > 0 {
		return nil
	}
	return []Finding{r.finding(fix, problem, describe(v))}
}

// --- reading plain values -------------------------------------------------

func isUnknown(v any) bool { _, ok := v.(Unknown); return ok }

// get follows keys through nested maps; nil when a key is absent, Unknown
// when any step is unknown.
func get(v any, keys ...string) any {
	for _, k := range keys {
		if isUnknown(v) {
			return v
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (r Resource) get(keys ...string) any { return get(map[string]any(r.Props), keys...) }

func str(v any) string  { s, _ := v.(string); return s }
func truthy(v any) bool { b, _ := v.(bool); return b }
func list(v any) []any  { l, _ := v.([]any); return l }
func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// number reads a number given as a number or a numeric string.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

// strings returns the string elements of a list.
func strs(v any) []string {
	var out []string
	for _, e := range list(v) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// dockerLabels reads pulumi-docker's [{label, value}] list into a map.
func dockerLabels(r Resource) map[string]string {
	out := map[string]string{}
	for _, l := range list(r.get("labels")) {
		m := obj(l)
		if k := str(m["label"]); k != "" {
			out[k] = str(m["value"])
		}
	}
	return out
}

// awsTags reads an aws resource's tags.
func awsTags(r Resource) map[string]string {
	out := map[string]string{}
	for k, v := range obj(r.get("tags")) {
		out[k] = str(v)
	}
	return out
}

// parseUser reads "uid[:gid]" with numeric IDs.
func parseUser(user string) (uid, gid int, numeric bool) {
	u, g, hasGID := strings.Cut(strings.TrimSpace(user), ":")
	var err error
	if uid, err = strconv.Atoi(u); err != nil {
		return 0, 0, false
	}
	gid = uid
	if hasGID {
		if gid, err = strconv.Atoi(g); err != nil {
			return 0, 0, false
		}
	}
	return uid, gid, uid >= 0 && gid >= 0
}

func byTypeSorted(rs []Resource, t string) []Resource {
	var out []Resource
	for _, r := range rs {
		if r.Type == t {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
