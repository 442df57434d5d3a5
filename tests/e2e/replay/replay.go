// Package replay creates the dev stack's declared resources, as captured
// under Pulumi's mock engine, on a real Docker engine: each pulumi-docker
// input becomes the Engine API field the docker provider sets, each
// pulumi-command step runs its script. An input it does not know fails the
// replay by name, so the e2e suite can never silently test less than the
// stack declares.
package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// RunLabel marks everything a replay creates, so leftovers of an earlier,
// interrupted run can be found and removed.
const RunLabel = "ai-flock.e2e"

// Deployment is a flock replayed on the engine: what the replay created.
type Deployment struct {
	Engine     *Engine
	Root       string            // project root (relative build contexts)
	Images     map[string]string // mock digest -> built image ID
	Containers map[string]string // logical name -> container ID
	Networks   map[string]string // logical name -> network ID
	created    []created         // what was created, in order: torn down in reverse
	Log        func(format string, args ...any)
}

// created is one resource the replay made, and how to delete it.
type created struct {
	typ, name string
	id        string            // container or network ID
	script    string            // a command's delete step
	env       map[string]string // its environment
}

// Replay creates every declared resource in dependency order.
func Replay(ctx context.Context, e *Engine, s *capture.Stack, root string, logf func(string, ...any)) (*Deployment, error) {
	if err := Check(s); err != nil {
		return nil, err
	}
	f := &Deployment{Engine: e, Root: root, Images: map[string]string{}, Containers: map[string]string{}, Networks: map[string]string{}, Log: logf}
	order, err := topo(s)
	if err != nil {
		return nil, err
	}
	for _, r := range order {
		start := time.Now()
		switch r.Type {
		case capture.TypeImage:
			err = f.image(ctx, r)
		case capture.TypeCommand:
			err = f.command(ctx, r)
		case capture.TypeNetwork:
			err = f.network(ctx, r)
		case capture.TypeContainer:
			err = f.container(ctx, r)
		default:
			continue
		}
		if err != nil {
			return f, fmt.Errorf("replay %s %s: %w", r.Type, r.Name, err)
		}
		f.Log("replayed %s %s in %s", r.Type, r.Name, time.Since(start).Round(time.Millisecond))
	}
	return f, nil
}

// topo orders resources so each comes after its dependencies.
func topo(s *capture.Stack) ([]capture.Resource, error) {
	byURN := map[string]int{}
	for i, r := range s.Resources {
		byURN[r.Name] = i
	}
	name := func(urn string) string { return urn[strings.LastIndex(urn, "::")+2:] }
	state := make([]int, len(s.Resources)) // 0 new, 1 visiting, 2 done
	var out []capture.Resource
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("replay: dependency cycle at %s", s.Resources[i].Name)
		case 2:
			return nil
		}
		state[i] = 1
		for _, d := range s.Resources[i].Deps {
			if j, ok := byURN[name(d)]; ok {
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		state[i] = 2
		out = append(out, s.Resources[i])
		return nil
	}
	for i := range s.Resources {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Teardown deletes what the replay created in reverse order of creation,
// as Pulumi deletes dependents before what they depend on (containers before
// the steps whose delete removes their images or credentials), then removes
// anything else labelled by a replay.
func (f *Deployment) Teardown(ctx context.Context) error {
	var errs []string
	for i := len(f.created) - 1; i >= 0; i-- {
		c := f.created[i]
		var err error
		switch c.typ {
		case capture.TypeContainer:
			err = f.Engine.Remove(ctx, c.id)
		case capture.TypeNetwork:
			err = f.Engine.RemoveNetwork(ctx, c.id)
		case capture.TypeCommand:
			var out string
			if out, err = runShell(ctx, c.script, "", c.env); err != nil {
				err = fmt.Errorf("%w: %s", err, out)
			}
		}
		if err != nil && !IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("delete %s %s: %v", c.typ, c.name, err))
		}
	}
	if err := Clean(ctx, f.Engine); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("teardown: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Clean removes every container and network labelled by a replay.
func Clean(ctx context.Context, e *Engine) error {
	cs, err := e.ListContainers(ctx, RunLabel+"=1")
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := e.Remove(ctx, c); err != nil && !IsNotFound(err) && !IsRemovalInProgress(err) {
			return err
		}
	}
	ns, err := e.ListNetworks(ctx, RunLabel+"=1")
	if err != nil {
		return err
	}
	for _, n := range ns {
		if err := e.RemoveNetwork(ctx, n); err != nil && !IsNotFound(err) {
			return err
		}
	}
	return nil
}
