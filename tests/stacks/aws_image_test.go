package stacks_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// awsOwnImageAgents: agent-1 and agent-2 name the same Dockerfile, agent-3
// and agent-5 the same base image (in entries of their own), agent-4 none.
func awsOwnImageAgents(t testing.TB) (config capture.Config, dockerfile string) {
	t.Helper()
	df := capture.ProjectFile(t, "tests", "e2e", "byo", "Dockerfile")
	return capture.Config{"flock:agentCount": "", "flock:agents": `[
		{"id": "agent-1", "image": {"dockerfile": "` + df + `"}},
		{"id": "agent-2", "image": {"dockerfile": "` + df + `"}},
		{"id": "agent-3", "image": {"base": "python:3.12-slim"}},
		{"id": "agent-4"},
		{"id": "agent-5", "image": {"base": "python:3.12-slim"}}]`}, df
}

// awsStockAgents is the same flock with every agent on the stock image.
func awsStockAgents() capture.Config {
	return capture.Config{"flock:agentCount": "", "flock:agents": `[{"id": "agent-1"}, {"id": "agent-2"}, {"id": "agent-3"}, {"id": "agent-4"}, {"id": "agent-5"}]`}
}

// An agent's own image on aws: built and pushed to the flock's repository
// like the stock ones (ECR token, linux/amd64, BuildKit), once per distinct
// spec; the user's Dockerfile built first (local, not pushed) and used as
// BASE by tag with its ID as BASE_ID; flock-agent added from the agent
// target; a tag of its own. Each agent runs its image's digest, with HOME
// its own directory; the stock agent is exactly what it is in a flock
// without own images; the lifecycle policy keeps each image's last 10.
func TestAWSOwnImages(t *testing.T) {
	cfg, df := awsOwnImageAgents(t)
	s := awsStack(t, cfg)
	stock := awsStack(t, awsStockAgents())
	ids := awsAgentIDs(5)
	b := awsBus{nodes: 3}
	// Everything else holds as for any flock: hardening, mounts, roles, tags.
	checkAWSComponent(t, s)
	checkAWSAgentTasks(t, s, ids, b)
	checkAWSServices(t, s, ids, b)
	checkAWSIAM(t, s, ids, b)
	checkAWSTags(t, s, ids)

	url := capture.MockRegistry() + "/flock-images"
	stockImg := awsGet(t, s, capture.TypeImage, "flock-agent-image")
	stockReg := stockImg.Plain()["registry"]
	images := map[string]capture.Resource{}
	var bases, own []string
	for _, r := range s.ByType(capture.TypeImage) {
		images[r.Name] = r
		switch {
		case strings.HasSuffix(r.Name, "-base-image"):
			bases = append(bases, r.Name)
		case strings.HasPrefix(r.Name, "flock-agent-") && r.Name != "flock-agent-image":
			own = append(own, r.Name)
		}
	}
	if len(images) != 5 || len(bases) != 1 || len(own) != 2 {
		t.Fatalf("images %v: want the stock agent and bus, one user build and two agent images on top (the Dockerfile's, python's)", keys(images))
	}

	// The user's build: their Dockerfile and context, for Fargate's
	// platform, kept local under a tag of its content.
	base := images[bases[0]]
	bb := obj(base, "build")
	if bb["dockerfile"] != df || bb["context"] != filepath.Dir(df) || bb["platform"] != awsflock.Platform || bb["builderVersion"] != "BuilderBuildKit" {
		t.Errorf("the user's build: %v", bb)
	}
	if !boolean(base, "skipPush") || base.Plain()["registry"] != nil {
		t.Errorf("the user's build is pushed: skipPush %v registry %v", base.Plain()["skipPush"], base.Plain()["registry"])
	}
	if name := base.String("imageName"); !strings.HasPrefix(name, "ai-flock/flock-agent-") || strings.HasSuffix(name, ":latest") || strings.Contains(name, capture.MockRegistry()) {
		t.Errorf("the user's build is named %q: want a local name whose tag is its content", name)
	}

	digestOf := map[string]string{} // BASE -> the digest tasks must run
	for _, name := range own {
		img := images[name]
		key := strings.TrimSuffix(strings.TrimPrefix(name, "flock-agent-"), "-image")
		tag := strings.TrimPrefix(img.String("imageName"), url+":")
		if !strings.HasPrefix(img.String("imageName"), url+":") || !strings.HasPrefix(tag, awsflock.OwnImagePrefix+key+"-") {
			t.Errorf("%s: pushed as %q, want %s:own-%s-…", name, img.String("imageName"), url, key)
		}
		for _, p := range []string{"agent-", "bus-", "gateway-"} {
			if strings.HasPrefix(tag, p) {
				t.Errorf("%s: tag %q starts like the stock %simages", name, tag, p)
			}
		}
		if boolean(img, "skipPush") || !reflect.DeepEqual(img.Plain()["registry"], stockReg) || !img.Inputs["registry"].ObjectValue()["password"].IsSecret() {
			t.Errorf("%s: registry %v, want the stock images' (ECR's token, the password a secret)", name, img.Plain()["registry"])
		}
		build := obj(img, "build")
		args := asMap(build["args"])
		if build["target"] != "agent" || build["dockerfile"] != "agent/Dockerfile" || build["context"] != "agent" || build["platform"] != awsflock.Platform || build["builderVersion"] != "BuilderBuildKit" {
			t.Errorf("%s: flock-agent must be added from agent/Dockerfile's agent target for %s: %v", name, awsflock.Platform, build)
		}
		switch args["BASE"] {
		case "python:3.12-slim":
			if _, has := args["BASE_ID"]; has || dependsOn(img, base) {
				t.Errorf("%s: a base image needs no build first: %v", name, args)
			}
		case base.String("imageName"):
			if args["BASE_ID"] != capture.MockDigest(bases[0]) || !dependsOn(img, base) {
				t.Errorf("%s: BASE_ID %v, depends on %v: want the user's build's ID, after it", name, args["BASE_ID"], img.Deps)
			}
		default:
			t.Errorf("%s: BASE %v", name, args["BASE"])
		}
		digestOf[fmt.Sprint(args["BASE"])] = url + "@" + capture.MockDigest(name)
	}

	// Each agent runs its image's digest; HOME only with its own image.
	want := map[string]string{
		"agent-1": digestOf[base.String("imageName")], "agent-2": digestOf[base.String("imageName")],
		"agent-3": digestOf["python:3.12-slim"], "agent-5": digestOf["python:3.12-slim"],
		"agent-4": url + "@" + capture.MockDigest("flock-agent-image"),
	}
	for _, id := range ids {
		c := awsContainer(t, awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+id+"-task"))
		if c.Image != want[id] || want[id] == "" {
			t.Errorf("%s runs %q, want %q", id, c.Image, want[id])
		}
		home, has := "", false
		for _, e := range c.Environment {
			if e.Name == "HOME" {
				home, has = e.Value, true
			}
		}
		switch {
		case id == "agent-4" && has:
			t.Errorf("agent-4 (stock image) got HOME %q", home)
		case id != "agent-4" && home != "/shared/agents/"+id:
			t.Errorf("%s (own image) HOME %q, want its own directory", id, home)
		}
	}
	for name, img := range map[string]string{"flock-operator-task": "flock-agent-image", "flock-bus-1-task": "flock-bus-image"} {
		if c := awsContainer(t, awsGet(t, s, awsrules.TypeTaskDefinition, name)); c.Image != url+"@"+capture.MockDigest(img) {
			t.Errorf("%s runs %q, want the stock %s", name, c.Image, img)
		}
	}

	// The stock agent, and what every flock has, are untouched.
	for _, r := range []struct{ typ, name string }{
		{awsrules.TypeTaskDefinition, "flock-agent-4-task"}, {awsrules.TypeService, "flock-agent-4"},
		{awsrules.TypeTaskDefinition, "flock-operator-task"}, {capture.TypeImage, "flock-agent-image"}, {capture.TypeImage, "flock-bus-image"},
	} {
		got, want := awsGet(t, s, r.typ, r.name), awsGet(t, stock, r.typ, r.name)
		if !reflect.DeepEqual(got.Plain(), want.Plain()) {
			t.Errorf("%s differs from the flock without own images:\n got %v\nwant %v", r.name, got.Plain(), want.Plain())
		}
	}

	// Lifecycle: the stock rules as they were, then one per own image,
	// whose prefix matches its images and nobody else's.
	rules := lifecycleRules(t, s)
	stockRules := lifecycleRules(t, stock)
	if len(rules) != len(stockRules)+2 || !reflect.DeepEqual(rules[:len(stockRules)], stockRules) {
		t.Fatalf("lifecycle rules %v: want the stock ones %v, then one per own image", rules, stockRules)
	}
	for _, img := range s.ByType(capture.TypeImage) {
		if boolean(img, "skipPush") {
			continue
		}
		tag := strings.TrimPrefix(img.String("imageName"), url+":")
		var matched []string
		for _, r := range rules {
			for _, p := range r.Selection.TagPrefixList {
				if strings.HasPrefix(tag, p) {
					matched = append(matched, p)
				}
			}
		}
		if len(matched) != 1 {
			t.Errorf("%s (tag %s) is counted by rules %v, want exactly one", img.Name, tag, matched)
		}
	}
	for i, r := range rules {
		if r.RulePriority != i+1 || r.Selection.TagStatus != "tagged" || r.Selection.CountType != "imageCountMoreThan" || r.Selection.CountNumber != 10 || r.Action.Type != "expire" {
			t.Errorf("rule %d: %+v", i, r)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

type lifecycleRule struct {
	RulePriority int `json:"rulePriority"`
	Selection    struct {
		TagStatus     string   `json:"tagStatus"`
		TagPrefixList []string `json:"tagPrefixList"`
		CountType     string   `json:"countType"`
		CountNumber   int      `json:"countNumber"`
	} `json:"selection"`
	Action struct {
		Type string `json:"type"`
	} `json:"action"`
}

func lifecycleRules(t testing.TB, s *capture.Stack) []lifecycleRule {
	t.Helper()
	var p struct{ Rules []lifecycleRule }
	lp := awsGet(t, s, awsrules.TypeLifecyclePolicy, "flock-images-lifecycle")
	if err := json.Unmarshal([]byte(lp.String("policy")), &p); err != nil {
		t.Fatal(err)
	}
	return p.Rules
}

// flock:image gives every agent the same own image: one build, one push,
// one lifecycle rule, every agent on it.
func TestAWSStackImage(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:agentCount": "50", "flock:image": `{"base": "python:3.12-slim"}`})
	var own []capture.Resource
	for _, r := range s.ByType(capture.TypeImage) {
		if r.Name != "flock-agent-image" && r.Name != "flock-bus-image" {
			own = append(own, r)
		}
	}
	if len(own) != 1 {
		t.Fatalf("%d own images, want 1", len(own))
	}
	digest := capture.MockRegistry() + "/flock-images@" + capture.MockDigest(own[0].Name)
	for _, id := range awsAgentIDs(50) {
		if c := awsContainer(t, awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+id+"-task")); c.Image != digest {
			t.Errorf("%s runs %q, want %q", id, c.Image, digest)
		}
	}
	if n := len(lifecycleRules(t, s)); n != 3 {
		t.Errorf("%d lifecycle rules, want the agent's, the bus's and the own image's", n)
	}
}

// A tag names one content: editing the user's context gives the image a
// new tag (and the user's build a new local tag); the rest stays.
func TestAWSOwnImageTagFollowsContent(t *testing.T) {
	dir := t.TempDir()
	df := filepath.Join(dir, "Dockerfile")
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Dockerfile", "FROM flock-test/bookworm-python:latest\nCOPY agent.py /opt/agent.py\n")
	write("agent.py", "print('v1')\n")
	run := func() (agent, base string) {
		s := awsStack(t, capture.Config{"flock:agentCount": "2", "flock:image": `{"dockerfile": "` + df + `"}`})
		for _, r := range s.ByType(capture.TypeImage) {
			switch {
			case strings.HasSuffix(r.Name, "-base-image"):
				base = r.String("imageName")
			case r.Name != "flock-agent-image" && r.Name != "flock-bus-image":
				agent = r.String("imageName")
			}
		}
		return agent, base
	}
	a1, b1 := run()
	a2, b2 := run()
	write("agent.py", "print('v2')\n")
	a3, b3 := run()
	if a1 == "" || b1 == "" || a1 != a2 || b1 != b2 {
		t.Errorf("the same content, tags %q %q then %q %q", a1, b1, a2, b2)
	}
	if a3 == a1 || b3 == b1 {
		t.Errorf("a changed context keeps its tags: %q %q", a3, b3)
	}
}

// The files must be there, with the dev stack's errors naming the key; at
// most MaxOwnImages distinct images.
func TestAWSOwnImageRules(t *testing.T) {
	_, err := capture.RunAWS(capture.Config{"flock:agentCount": "", "flock:agents": `[{"id": "agent-1"}, {"id": "agent-2", "image": {"dockerfile": "no/such/Dockerfile"}}]`})
	for _, want := range []string{`flock:agents[1].image.dockerfile: "no/such/Dockerfile" is not a file here`, `flock:agents[1].image.context: "no/such" is not a directory here`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
	dir := t.TempDir()
	_, err = capture.RunAWS(capture.Config{"flock:image": `{"dockerfile": "` + dir + `", "context": "` + filepath.Join(dir, "Dockerfile") + `"}`})
	for _, want := range []string{`flock:image.dockerfile: "` + dir + `" is not a file here`, `flock:image.context: "` + filepath.Join(dir, "Dockerfile") + `" is not a directory here`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
	// The model's own rules are the model's, as on the dev stack.
	_, err = capture.RunAWS(capture.Config{"flock:image": `{"base": "python:3.12", "dockerfile": "x/Dockerfile"}`})
	if want := "flock:image: set base (an image flock-agent goes on top of) or dockerfile (built first), not both"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("want %q in:\n%v", want, err)
	}

	agents := func(n int) string {
		var l []string
		for i := 1; i <= n; i++ {
			l = append(l, fmt.Sprintf(`{"id": "agent-%d", "image": {"base": "python:3.%d"}}`, i, i))
		}
		return "[" + strings.Join(l, ",") + "]"
	}
	max := awsflock.MaxOwnImages
	s := awsStack(t, capture.Config{"flock:agentCount": "", "flock:agents": agents(max)})
	lp := awsGet(t, s, awsrules.TypeLifecyclePolicy, "flock-images-lifecycle").String("policy")
	if len(lifecycleRules(t, s)) != max+2 || len(lp) > 30720 {
		t.Errorf("%d own images: %d lifecycle rules, a policy of %d characters (ECR takes 30,720)", max, len(lifecycleRules(t, s)), len(lp))
	}
	_, err = capture.RunAWS(capture.Config{"flock:agentCount": "", "flock:agents": agents(max + 1)})
	if want := fmt.Sprintf("flock:agents[%d].image: would be the flock's agent image number %d: the aws target builds at most %d", max, max+1, max); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("want %q in:\n%v", want, err)
	}
}
