package tfcheck

import (
	"sort"
	"strings"

	"github.com/ai-flock/ai-flock/tests/capture"
)

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
