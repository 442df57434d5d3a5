package arch_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The docs are a set of pages that link to each other: a page moved or a
// heading renamed must not leave a link pointing at nothing.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages := markdownFiles(t, root)
	headings := map[string]map[string]bool{}
	for _, p := range pages {
		headings[p] = anchorsOf(t, filepath.Join(root, p))
	}
	link := regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	for _, p := range pages {
		body, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(string(body)), -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue // http:, mailto:
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(p), file))
			}
			if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
				t.Errorf("%s: link %q: no such file %s", p, target, dest)
				continue
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !headings[dest][anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", p, target, dest, anchor)
			}
		}
	}
}

// The README is where a newcomer starts: what it is, the two commands, the
// daily work, and where to read more. The rest lives in docs/ by topic.
func TestReadmeStaysAStartingPage(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; keep it under 200 and move the detail to a page under docs/", n)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var pages []string
	for _, p := range strings.Fields(string(out)) {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			pages = append(pages, p)
		}
	}
	if len(pages) == 0 {
		t.Fatal("no markdown files found")
	}
	return pages
}

// anchorsOf returns the anchors GitHub gives a page's headings.
func anchorsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]bool{}
	inCode := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[slug(strings.TrimLeft(line, "# "))] = true
	}
	return anchors
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// stripCode drops fenced code blocks, where brackets are not links.
func stripCode(s string) string {
	var out []string
	in := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func TestSlugMatchesGitHub(t *testing.T) {
	for h, want := range map[string]string{
		"Booted for real: `make vm-test`":       "booted-for-real-make-vm-test",
		"Model access: the gateway":             "model-access-the-gateway",
		"One bus node or three (aws)":           "one-bus-node-or-three-aws",
		"CIS Docker Benchmark 1.6.0, section 5": "cis-docker-benchmark-160-section-5",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
