package egress

import (
	"maps"
	"slices"
)

// Presets are rules for common needs, each with the hosts its service
// redirects to. A preset is a plain expansion: `flock-agent egress presets`
// prints each, and a rule {preset: NAME} in the config is replaced by these
// rules (with the preset rule's agents and, on its first host, its
// credential). Every preset reads and fetches; none pushes or publishes:
// a rule of the operator's own names that.
var Presets = map[string][]Rule{
	// GitHub: git fetch over smart HTTP (discovery, then upload-pack),
	// release and archive downloads, raw files, and LFS downloads (the
	// batch API is a POST; its objects come from the LFS host).
	"github": {
		{Host: "github.com", Paths: []string{
			"GET /*/*/info/refs?service=git-upload-pack",
			"POST /*/*/git-upload-pack",
			"POST /*/*/info/lfs/objects/batch",
			"GET /*/*/archive/**",
			"GET /*/*/releases/download/**",
		}},
		{Host: "codeload.github.com"},
		{Host: "objects.githubusercontent.com"},
		{Host: "raw.githubusercontent.com"},
		{Host: "github-cloud.githubusercontent.com"},
		{Host: "media.githubusercontent.com"},
	},
	// PyPI: the simple index and the JSON API, and the files it links to.
	"pypi": {
		{Host: "pypi.org", Paths: []string{"/simple/**", "/pypi/**"}},
		{Host: "files.pythonhosted.org", Paths: []string{"/packages/**"}},
	},
	// The Go module proxy and checksum database (GOPROXY, GOSUMDB).
	"goproxy": {
		{Host: "proxy.golang.org"},
		{Host: "sum.golang.org", Paths: []string{"/lookup/**", "/tile/**", "/latest"}},
	},
	// npm's registry: package documents and tarballs (no publish: that is a PUT).
	"npm": {
		{Host: "registry.npmjs.org"},
	},
}

// PresetNames are the presets' names, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(Presets)) }

// expand returns the rules preset p stands for, carrying r's agents, and
// r's credential on the preset's first host.
func expand(r Rule) []Rule {
	var out []Rule
	for i, pr := range Presets[r.Preset] {
		pr.Paths = slices.Clone(pr.Paths)
		pr.Agents = slices.Clone(r.Agents)
		pr.RequestsPerMinute, pr.MaxRequestBytes, pr.MaxResponseBytes = r.RequestsPerMinute, r.MaxRequestBytes, r.MaxResponseBytes
		if r.Budget != nil {
			b := *r.Budget
			pr.Budget = &b
		}
		if i == 0 && r.Credential != nil {
			c := *r.Credential
			pr.Credential = &c
		}
		out = append(out, pr)
	}
	return out
}
