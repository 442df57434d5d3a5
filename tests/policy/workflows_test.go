package policy_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// workflow is the part of a GitHub workflow these tests read.
type workflow struct {
	On   map[string]any `yaml:"on"`
	Jobs map[string]struct {
		If          string `yaml:"if"`
		Environment any    `yaml:"environment"`
		Strategy    struct {
			Matrix map[string]any `yaml:"matrix"`
		} `yaml:"strategy"`
		Steps []struct {
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			If   string            `yaml:"if"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func readWorkflow(t *testing.T, name string) workflow {
	t.Helper()
	raw, err := os.ReadFile(capture.ProjectFile(t, ".github", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(raw, &w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return w
}

var pinned = regexp.MustCompile(`^[\w.-]+/[\w.-]+(/[\w./-]+)?@(v\d+(\.\d+){0,2}|[0-9a-f]{40})$`)

// TestWorkflows checks what actionlint cannot: that the workflows do what the
// project promises (actionlint itself runs in tests/policy/actionlint.sh).
func TestWorkflows(t *testing.T) {
	preview := readWorkflow(t, "preview.yml")
	if _, ok := preview.On["pull_request"]; !ok {
		t.Error("preview.yml does not run on pull requests")
	}
	deploy := readWorkflow(t, "deploy.yml")
	if _, ok := deploy.On["push"]; !ok {
		t.Error("deploy.yml does not run on push")
	}
	commands := map[string]int{}
	for name, w := range map[string]workflow{"preview.yml": preview, "deploy.yml": deploy} {
		for jobName, job := range w.Jobs {
			for _, s := range job.Steps {
				if s.Uses != "" && !pinned.MatchString(s.Uses) {
					t.Errorf("%s/%s: %q is not pinned to a version", name, jobName, s.Uses)
				}
				if cmd := s.With["command"]; cmd != "" {
					commands[name+" "+cmd]++
					if s.With["policyPacks"] != "infra/policy" || s.With["diff"] != "true" {
						t.Errorf("%s/%s: pulumi %s runs without --diff --policy-pack infra/policy: %v", name, jobName, cmd, s.With)
					}
				}
			}
			if name == "preview.yml" {
				stacks, _ := job.Strategy.Matrix["stack"].([]any)
				if !slices.Contains(stacks, any("dev")) || !slices.Contains(stacks, any("aws")) {
					t.Errorf("preview.yml/%s previews %v, want dev and aws", jobName, stacks)
				}
				for _, s := range job.Steps {
					if s.With["command"] == "preview" && s.With["comment-on-pr"] != "true" {
						t.Errorf("preview.yml/%s: the preview is not posted on the pull request", jobName)
					}
				}
			}
			if name == "deploy.yml" {
				if job.If != "vars.FLOCK_DEPLOY == 'true'" {
					t.Errorf("deploy.yml/%s runs unless gated by vars.FLOCK_DEPLOY: if %q", jobName, job.If)
				}
				if job.Environment == nil {
					t.Errorf("deploy.yml/%s deploys outside a GitHub environment (no approval)", jobName)
				}
			}
		}
	}
	if commands["preview.yml preview"] != 1 || commands["deploy.yml up"] != 1 {
		t.Errorf("pulumi commands in the workflows: %v", commands)
	}
}
