package stacks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// An agent's own image: the user's Dockerfile built first, then flock-agent
// added on top from agent/Dockerfile's agent target (BASE); agents naming
// the same image share it; the others keep the stock image.
func TestDevOwnImages(t *testing.T) {
	df := capture.ProjectFile(t, "tests", "e2e", "byo", "Dockerfile")
	s := dev(t, capture.Config{"flock:agentCount": "", "flock:agents": `[
		{"id": "agent-1", "image": {"dockerfile": "` + df + `"}},
		{"id": "agent-2", "image": {"dockerfile": "` + df + `"}},
		{"id": "agent-3", "image": {"base": "python:3.12-slim"}},
		{"id": "agent-4"}]`})
	images := map[string]capture.Resource{}
	for _, r := range s.ByType(capture.TypeImage) {
		images[r.Name] = r
	}
	var base, own, fromBase []string
	for name := range images {
		switch {
		case strings.HasSuffix(name, "-base-image"):
			base = append(base, name)
		case strings.HasPrefix(name, "flock-agent-") && name != "flock-agent-image":
			own = append(own, name)
		}
	}
	if len(base) != 1 || len(own) != 2 {
		t.Fatalf("images %v: want one user build and two agent images on top (the Dockerfile's, python's)", images)
	}
	b := images[base[0]].Plain()["build"].(map[string]any)
	if b["dockerfile"] != df || b["context"] != filepath.Dir(df) {
		t.Errorf("the user's build: %v", b)
	}
	for _, name := range own {
		build := images[name].Plain()["build"].(map[string]any)
		args := build["args"].(map[string]any)
		if build["target"] != "agent" || build["dockerfile"] != "agent/Dockerfile" {
			t.Errorf("%s: flock-agent must be added from agent/Dockerfile's agent target: %v", name, build)
		}
		switch args["BASE"] {
		case "python:3.12-slim":
		default:
			if !strings.HasSuffix(args["BASE"].(string), "-base:latest") || args["BASE_ID"] == nil {
				t.Errorf("%s: BASE %v BASE_ID %v", name, args["BASE"], args["BASE_ID"])
			}
			fromBase = append(fromBase, name)
		}
	}
	if len(fromBase) != 1 {
		t.Errorf("one agent image on the user's build, got %v", fromBase)
	}
	agents := agentContainers(t, s)
	img := func(id string) string { return agents[id].String("image") }
	if img("agent-1") != img("agent-2") || img("agent-1") == img("agent-3") || img("agent-4") != capture.MockDigest("flock-agent-image") {
		t.Errorf("images: agent-1 %s agent-2 %s agent-3 %s agent-4 %s", img("agent-1"), img("agent-2"), img("agent-3"), img("agent-4"))
	}
	if env := envOf(agents["agent-1"]); env["HOME"] != "/shared/agents/agent-1" {
		t.Errorf("agent-1 (own image) HOME %q", env["HOME"])
	}
	if _, has := envOf(agents["agent-4"])["HOME"]; has {
		t.Errorf("agent-4 (stock image) got a HOME")
	}
	cleanup, _ := s.Get(capture.TypeCommand, "flock-images-cleanup")
	for _, name := range []string{"-base:latest", "ai-flock/flock-agent-"} {
		if !strings.Contains(cleanup.String("delete"), name) {
			t.Errorf("destroy leaves %s* behind: %s", name, cleanup.String("delete"))
		}
	}
}

func TestOwnImageRules(t *testing.T) {
	_, err := capture.RunDev(capture.Config{"flock:agentCount": "", "flock:image": `{"base": "python:3.12", "dockerfile": "x/Dockerfile"}`,
		"flock:agents": `[{"id": "agent-1"}, {"id": "agent-2", "image": {"dockerfile": "no/such/Dockerfile"}}, {"id": "agent-3", "image": {"base": "Not An Image"}}]`})
	for _, want := range []string{
		"flock:image: set base (an image flock-agent goes on top of) or dockerfile (built first), not both",
		`flock:agents[2].image.base: must be an image reference`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
	// Once the model is valid, the files must be there.
	_, err = capture.RunDev(capture.Config{"flock:agentCount": "", "flock:agents": `[{"id": "agent-1"}, {"id": "agent-2", "image": {"dockerfile": "no/such/Dockerfile"}}]`})
	for _, want := range []string{`flock:agents[1].image.dockerfile: "no/such/Dockerfile" is not a file here`, `flock:agents[1].image.context: "no/such" is not a directory here`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
}
