package awsflock

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
)

func TestSizeFor(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		mem  int
		want TaskSize
	}{
		{0.25, 256, TaskSize{256, 512}},
		{0.25, 1500, TaskSize{256, 2048}},
		{0.25, 3000, TaskSize{512, 3072}},
		{0.5, 256, TaskSize{512, 1024}},
		{1, 512, TaskSize{1024, 2048}},
		{1, 9000, TaskSize{2048, 9216}},
		{3, 4096, TaskSize{4096, 8192}},
		{8, 20000, TaskSize{8192, 20480}},
		{16, 122880, TaskSize{16384, 122880}},
	} {
		got, err := SizeFor(flock.Limits{CPUs: c.cpus, MemoryMiB: c.mem})
		if err != nil || got != c.want {
			t.Errorf("%v vCPU %d MiB: %+v %v, want %+v", c.cpus, c.mem, got, err, c.want)
		}
	}
	for _, l := range []flock.Limits{{CPUs: 17, MemoryMiB: 512}, {CPUs: 1, MemoryMiB: 130000}} {
		if _, err := SizeFor(l); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
}

func TestSubnet(t *testing.T) {
	cidr := netip.MustParsePrefix("10.220.0.0/16")
	for i, want := range map[int]string{0: "10.220.0.0/20", 1: "10.220.16.0/20", 15: "10.220.240.0/20"} {
		if got, err := Subnet(cidr, i); err != nil || got.String() != want {
			t.Errorf("subnet %d: %v %v, want %s", i, got, err, want)
		}
	}
	if _, err := Subnet(cidr, 16); err == nil {
		t.Error("subnet 16 of 16 accepted")
	}
	if c := PrivateCapacity(netip.MustParsePrefix("10.0.0.0/22"), 2); c != 2*(64-5-5) {
		t.Errorf("capacity %d", c)
	}
}

func TestContextTag(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644)
	a, err := ContextTag(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ContextTag(dir)
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nUSER 1000\n"), 0o644)
	c, _ := ContextTag(dir)
	if a != b || a == c || len(a) != 17 {
		t.Errorf("tags %q %q %q: want stable for one content, new for another", a, b, c)
	}
	if _, err := ContextTag(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("missing context: %v", err)
	}
}

// An own image's tags: stable for one content, new when the user's
// Dockerfile, its context or the agent context changes; the user's build's
// tag follows only its own content; never a stock image's tag.
func TestTagOwnImage(t *testing.T) {
	dir := t.TempDir()
	df := filepath.Join(dir, "Dockerfile")
	os.WriteFile(df, []byte("FROM debian\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "agent.py"), []byte("v1"), 0o644)
	img := flock.Image{Dockerfile: df, Context: dir, ConfigKey: "flock:image"}
	tag := func(img flock.Image, agentTag string) OwnImageTags {
		t.Helper()
		tags, err := TagOwnImage(img, agentTag)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tags.Agent, "own-"+img.Key()+"-") || !tagPattern.MatchString(tags.Agent) || len(tags.Agent) > 128 {
			t.Errorf("tag %q: want own-%s-<digest>, a docker tag", tags.Agent, img.Key())
		}
		return tags
	}
	a, b := tag(img, "c1"), tag(img, "c1")
	os.WriteFile(filepath.Join(dir, "agent.py"), []byte("v2"), 0o644)
	c := tag(img, "c1")
	os.WriteFile(df, []byte("FROM debian:12\n"), 0o644)
	d := tag(img, "c1")
	e := tag(img, "c2")
	if a != b || a.Base == "" {
		t.Errorf("one content, tags %+v %+v", a, b)
	}
	if c.Agent == a.Agent || c.Base == a.Base || d.Agent == c.Agent || d.Base == c.Base {
		t.Errorf("a changed context or Dockerfile keeps its tags: %+v %+v %+v", a, c, d)
	}
	if e.Agent == d.Agent || e.Base != d.Base {
		t.Errorf("a new agent context: %+v then %+v (want a new agent tag, the same user's build)", d, e)
	}
	py := flock.Image{Base: "python:3.12-slim", ConfigKey: "flock:image"}
	f, g := tag(py, "c1"), tag(py, "c2")
	if f.Base != "" || f.Agent == g.Agent {
		t.Errorf("base image: %+v %+v", f, g)
	}
	if _, err := TagOwnImage(flock.Image{Dockerfile: filepath.Join(dir, "none"), Context: dir}, "c1"); err == nil {
		t.Error("a missing Dockerfile is tagged")
	}
}

func TestPolicies(t *testing.T) {
	var p PolicyDocument
	if err := json.Unmarshal([]byte(MountPolicy("fs", []string{"ap1", "ap2"}, []string{"common"})), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Statement) != 2 || len(p.Statement[0].Action) != 2 || len(p.Statement[1].Action) != 1 {
		t.Fatalf("mount policy %+v", p)
	}
	if err := json.Unmarshal([]byte(ExecPolicy("repo", "lg", []string{"s2", "s1"})), &p); err != nil {
		t.Fatal(err)
	}
	last := p.Statement[len(p.Statement)-1]
	if last.Resource[0] != "s1" || last.Resource[1] != "s2" {
		t.Errorf("secrets not sorted: %v", last.Resource)
	}
}
