// Package awsrules is the one table of what AWS accepts in the fields the
// aws stack sets: lengths, characters, shapes and ranges, each with the AWS
// reference it comes from. The aws component checks every value it derives
// from the configuration against it before it declares anything
// (awsflock.Config.Validate), and the policy pack checks every declared
// resource against it (infra/policy/rules): nothing AWS would refuse
// reaches AWS.
//
// Plain Go with no dependencies, so the policy pack imports it without
// Pulumi's SDKs.
package awsrules

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Rule is what AWS accepts in one string field.
type Rule struct {
	What  string // the value as users read it: "IAM role name"
	Type  string // the Pulumi resource type whose input carries it
	Input string // that input: "name", "description", "tags", ...
	Field string // the AWS API field: "CreateRole RoleName"
	// Min and Max bound the length in characters (Max 0: no bound).
	Min, Max int
	// Chars matches one allowed character (nil: any); Allowed says which,
	// as AWS words it.
	Chars   *regexp.Regexp
	Allowed string
	// Shape matches the whole value (nil: any arrangement of Chars);
	// ShapeText says what it must look like.
	Shape     *regexp.Regexp
	ShapeText string
	// Reserved is a prefix AWS keeps for itself (compared ignoring case).
	Reserved string
	// MaxDepth bounds the directory levels of a path (0: no bound).
	MaxDepth int
	// Ref is the AWS reference the rule comes from.
	Ref string
}

// Range is what AWS accepts in one whole-number field.
type Range struct {
	What     string
	Type     string
	Input    string
	Field    string
	Min, Max int
	Unit     string // "seconds", or "" for a count
	Ref      string
}

// Violation is a value a rule refuses and why.
type Violation struct {
	What    string // the rule's What
	Value   string
	Problem string // a predicate: "is 70 characters long", "holds the character \"'\""
	Limit   string // the rule, as a sentence
	Ref     string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s %q %s; %s (%s)", v.What, v.Value, v.Problem, v.Limit, v.Ref)
}

// Limit says the rule in one phrase, for messages.
func (r Rule) Limit() string {
	var parts []string
	switch {
	case r.Max > 0 && r.Min > 1:
		parts = append(parts, fmt.Sprintf("%d to %d characters", r.Min, r.Max))
	case r.Max > 0:
		parts = append(parts, fmt.Sprintf("at most %d characters", r.Max))
	case r.Min > 0:
		parts = append(parts, fmt.Sprintf("at least %d characters", r.Min))
	}
	if r.Allowed != "" {
		parts = append(parts, "of "+r.Allowed)
	}
	s := r.What + ": " + strings.Join(parts, " ")
	if r.ShapeText != "" {
		s += ", " + r.ShapeText
	}
	if r.MaxDepth > 0 {
		s += fmt.Sprintf(", at most %d directory levels", r.MaxDepth)
	}
	if r.Reserved != "" {
		s += fmt.Sprintf(", not starting with %q", r.Reserved)
	}
	return s
}

// Check returns nil when AWS accepts v, else a *Violation saying why not
// (the first problem found: length, then characters, then shape).
func (r Rule) Check(v string) error {
	bad := func(format string, a ...any) error {
		return &Violation{What: r.What, Value: v, Problem: fmt.Sprintf(format, a...), Limit: r.Limit(), Ref: r.Ref}
	}
	n := utf8.RuneCountInString(v)
	switch {
	case n < r.Min && n == 0:
		return bad("is empty")
	case n < r.Min:
		return bad("is %d characters long", n)
	case r.Max > 0 && n > r.Max:
		return bad("is %d characters long", n)
	}
	if r.Chars != nil {
		for _, c := range v {
			if !r.Chars.MatchString(string(c)) {
				return bad("holds the character %q", c)
			}
		}
	}
	if r.Reserved != "" && len(v) >= len(r.Reserved) && strings.EqualFold(v[:len(r.Reserved)], r.Reserved) {
		return bad("starts with the reserved prefix %q", v[:len(r.Reserved)])
	}
	if r.Shape != nil && !r.Shape.MatchString(v) {
		return bad("is not of that form")
	}
	if r.MaxDepth > 0 {
		if d := strings.Count(strings.Trim(v, "/"), "/") + 1; v != "/" && d > r.MaxDepth {
			return bad("is %d directory levels deep", d)
		}
	}
	return nil
}

// Limit says the range in one phrase, for messages.
func (r Range) Limit() string {
	s := fmt.Sprintf("%s: %d to %d", r.What, r.Min, r.Max)
	if r.Unit != "" {
		s += " " + r.Unit
	}
	return s
}

// Check returns nil when AWS accepts v, else a *Violation.
func (r Range) Check(v int) error {
	if v >= r.Min && v <= r.Max {
		return nil
	}
	return &Violation{What: r.What, Value: fmt.Sprint(v), Problem: "is out of range", Limit: r.Limit(), Ref: r.Ref}
}

// AutoNameRandom is what the Pulumi aws provider appends to a resource's
// logical name when it names the resource itself (no name or namePrefix
// input): "-" and 7 random hexadecimal characters. A rule on an auto-named
// resource applies to the logical name plus these 8 characters.
// (Not an AWS rule: the Pulumi terraform bridge's AutoName, which pulumi-aws
// uses, adds a separator and Randlen 7 random hex digits; its
// AutoNameTransform documents "an 8 character random suffix ("-"+7 random
// chars)".)
const AutoNameRandom = 8

// AutoName is the name an auto-named resource gets, its random part
// written as x's (letters every rule here allows).
func AutoName(logical string) string { return logical + "-" + strings.Repeat("x", AutoNameRandom-1) }

// PrefixRandom is what the provider (terraform-provider-aws, under
// pulumi-aws) appends to a namePrefix: a 26-character unique ID.
const PrefixRandom = 26

// PrefixOf is rule r for a namePrefix: the same characters, room left for
// the provider's PrefixRandom characters (IAMRoleNamePrefix is
// PrefixOf(IAMRoleName)).
func PrefixOf(r Rule) Rule {
	p := r
	p.What += " prefix"
	p.Input = "namePrefix"
	p.Min = 1
	p.Shape, p.ShapeText = nil, ""
	if r.Max > PrefixRandom {
		p.Max = r.Max - PrefixRandom
	}
	return p
}

func chars(class string) *regexp.Regexp { return regexp.MustCompile(`^[` + class + `]$`) }
