package egress

import (
	"fmt"
	"net/url"
	"strings"
)

// PathPattern is the rule for a path pattern, matched segment by segment
// against the path as the agent sent it (escaped):
//
//   - a literal segment matches itself;
//   - "*" inside a segment matches any run of characters but '/'
//     ("*.git" matches "repo.git");
//   - a segment "**" matches zero or more whole segments;
//   - "?name=value&..." after the path: the request's query must carry
//     each such parameter exactly once with that value (other parameters
//     are free). A git fetch's discovery is "GET /org/repo.git/info/refs
//     ?service=git-upload-pack"; a push's says git-receive-pack, so a rule
//     with the first allows fetching and not pushing. Without "?" any
//     query is allowed.
const PathPattern = `/segment/... where a segment is literal characters [A-Za-z0-9._~!$&'()+,=@:-], with "*" inside, or "**" alone; then optionally ?name=value&...`

const patternChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~!$&'()+,=@:-*"

// pattern is a compiled PathPattern.
type pattern struct {
	segs  []string
	query map[string]string
}

// pathRule is one (method, pattern) a rule allows.
type pathRule struct {
	method string
	path   pattern
}

// parsePattern compiles p, or says what is wrong with it.
func parsePattern(p string) (pattern, error) {
	var out pattern
	raw, q, hasQuery := strings.Cut(p, "?")
	if !strings.HasPrefix(raw, "/") {
		return out, fmt.Errorf("must start with '/' (got %q)", p)
	}
	if raw != "/" {
		segs := strings.Split(raw[1:], "/")
		for i, seg := range segs {
			switch {
			case seg == "" && i == len(segs)-1: // a trailing '/': "/simple/*/"
				out.segs = append(out.segs, seg)
				continue
			case seg == "":
				return out, fmt.Errorf("has an empty segment (\"//\"): %q", p)
			case seg == "." || seg == "..":
				return out, fmt.Errorf("has a dot segment: %q", p)
			case seg == "**":
			case strings.Contains(seg, "**"):
				return out, fmt.Errorf("\"**\" must be a whole segment: %q", p)
			}
			for _, c := range seg {
				if !strings.ContainsRune(patternChars, c) {
					return out, fmt.Errorf("has %q, which is not a path character a rule may name (%%-escapes and ';' are refused in requests, so never matched): %q", c, p)
				}
			}
			out.segs = append(out.segs, seg)
		}
	}
	if hasQuery {
		out.query = map[string]string{}
		for _, kv := range strings.Split(q, "&") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" || strings.ContainsAny(kv, "*%+#") {
				return out, fmt.Errorf("its query must be name=value pairs joined by '&', with no '*' or escapes: %q", p)
			}
			out.query[k] = v
		}
	}
	return out, nil
}

// Match reports whether the escaped path and parsed query match.
func (p pattern) Match(rawPath string, q url.Values) bool {
	for k, v := range p.query {
		if got := q[k]; len(got) != 1 || got[0] != v {
			return false
		}
	}
	var segs []string
	if rawPath != "/" {
		segs = strings.Split(strings.TrimPrefix(rawPath, "/"), "/")
	}
	return matchSegs(p.segs, segs)
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := len(segs); i >= 0; i-- {
				if matchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 || !matchSeg(pat[0], segs[0]) {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// matchSeg matches one segment with '*' wildcards (no '/' in either); a
// lone "*" matches a segment that is not empty.
func matchSeg(pat, s string) bool {
	if pat == "*" {
		return s != ""
	}
	return matchStars(pat, s)
}

func matchStars(pat, s string) bool {
	star := strings.IndexByte(pat, '*')
	if star < 0 {
		return pat == s
	}
	if !strings.HasPrefix(s, pat[:star]) {
		return false
	}
	rest := pat[star+1:]
	s = s[star:]
	for i := 0; i <= len(s); i++ {
		if matchStars(rest, s[i:]) {
			return true
		}
	}
	return false
}

// MaxPathLen bounds a request path the broker reads.
const MaxPathLen = 4096

// CanonicalPath says why a request's escaped path is refused whatever the
// rules ("" when it is not): a path that means something other than it
// says to some server is never matched. Refused: no leading '/', an empty
// segment ("//"), a dot segment, ';' (path parameters), '\', and any
// %-escape of a character with meaning in a path ('/', '.', ';', '\', '%',
// '?', '#'), or a malformed one. A trailing '/' is a path of its own
// ("/simple/pkg/" is not "/simple/pkg"): a pattern names it, or "**" takes it.
func CanonicalPath(raw string) string {
	switch {
	case len(raw) > MaxPathLen:
		return fmt.Sprintf("the path is over %d bytes", MaxPathLen)
	case !strings.HasPrefix(raw, "/"):
		return "the path must start with '/'"
	case strings.ContainsAny(raw, ";\\"):
		return "the path has ';' or '\\', which servers read differently: refused whatever the rules"
	}
	if raw == "/" {
		return ""
	}
	segs := strings.Split(raw[1:], "/")
	for i, seg := range segs {
		switch seg {
		case "":
			if i == len(segs)-1 { // a trailing '/'
				continue
			}
			return "the path has an empty segment (\"//\"): refused whatever the rules"
		case ".", "..":
			return "the path has a dot segment: refused whatever the rules"
		}
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '%' {
			continue
		}
		if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
			return "the path has a malformed %-escape"
		}
		switch strings.ToLower(raw[i+1 : i+3]) {
		case "2f", "2e", "3b", "5c", "25", "3f", "23", "00":
			return fmt.Sprintf("the path has %%%s, an escape of a character with meaning in a path: refused whatever the rules", raw[i+1:i+3])
		}
	}
	return ""
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
