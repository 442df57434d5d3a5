// The engine's containers: their life cycle, state, output and events.

package replay

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// CreateContainer creates a container and returns its ID.
func (e *Engine) CreateContainer(ctx context.Context, name string, req map[string]any) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	err := e.do(ctx, "POST", "/containers/create?name="+url.QueryEscape(name), req, &out)
	return out.ID, err
}

// Start starts a container by name or ID.
func (e *Engine) Start(ctx context.Context, id string) error {
	return e.do(ctx, "POST", "/containers/"+url.PathEscape(id)+"/start", nil, nil)
}

// Stop stops a container, waiting up to timeout seconds before SIGKILL.
func (e *Engine) Stop(ctx context.Context, id string, timeout int) error {
	return e.do(ctx, "POST", fmt.Sprintf("/containers/%s/stop?t=%d", url.PathEscape(id), timeout), nil, nil)
}

// Kill sends a signal to a container's init.
func (e *Engine) Kill(ctx context.Context, id, signal string) error {
	return e.do(ctx, "POST", "/containers/"+url.PathEscape(id)+"/kill?signal="+signal, nil, nil)
}

// Restart restarts a container.
func (e *Engine) Restart(ctx context.Context, id string, timeout int) error {
	return e.do(ctx, "POST", fmt.Sprintf("/containers/%s/restart?t=%d", url.PathEscape(id), timeout), nil, nil)
}

// Remove force-removes a container.
func (e *Engine) Remove(ctx context.Context, id string) error {
	return e.do(ctx, "DELETE", "/containers/"+url.PathEscape(id)+"?force=1&v=1", nil, nil)
}

// Update changes a container's resources (as `docker update` does).
func (e *Engine) Update(ctx context.Context, id string, req map[string]any) error {
	return e.do(ctx, "POST", "/containers/"+url.PathEscape(id)+"/update", req, nil)
}

// Inspect returns a container's inspect document.
func (e *Engine) Inspect(ctx context.Context, id string) (map[string]any, error) {
	return e.inspect(ctx, "/containers/"+url.PathEscape(id)+"/json")
}

// MemoryUsage is a running container's memory use as its cgroup counts it,
// less the page cache it can give back (what `docker stats` shows).
func (e *Engine) MemoryUsage(ctx context.Context, id string) (uint64, error) {
	var out struct {
		MemoryStats struct {
			Usage uint64            `json:"usage"`
			Stats map[string]uint64 `json:"stats"`
		} `json:"memory_stats"`
	}
	if err := e.do(ctx, "GET", "/containers/"+url.PathEscape(id)+"/stats?stream=false", nil, &out); err != nil {
		return 0, err
	}
	m := out.MemoryStats
	if m.Usage == 0 {
		return 0, fmt.Errorf("container %s reports no memory use (not running?)", id)
	}
	cache := m.Stats["inactive_file"]                // cgroup v2
	if c, ok := m.Stats["total_inactive_file"]; ok { // cgroup v1
		cache = c
	}
	return m.Usage - min(cache, m.Usage), nil
}

// ListContainers lists containers (all states) carrying label (k=v).
func (e *Engine) ListContainers(ctx context.Context, label string) ([]string, error) {
	return e.labelled(ctx, "/containers/json?all=1&filters=", label)
}

// OOMEvents counts the engine's "oom" events for a container (ID or name)
// from since until now: the record of an OOM kill that outlives the
// container's State.OOMKilled, which a restart clears.
func (e *Engine) OOMEvents(ctx context.Context, container string, since time.Time) (int, error) {
	f, _ := json.Marshal(map[string][]string{"container": {container}, "event": {"oom"}})
	path := fmt.Sprintf("/events?since=%d&until=%d&filters=%s", since.Unix(), time.Now().Unix(), url.QueryEscape(string(f)))
	req, err := http.NewRequestWithContext(ctx, "GET", e.base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, &APIError{Status: resp.StatusCode, Message: string(b)}
	}
	n := 0
	for dec := json.NewDecoder(resp.Body); ; n++ {
		var ev map[string]any
		if err := dec.Decode(&ev); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
	}
}

// Archive copies path out of a container (created or running) as a tar
// stream, as `docker cp` does: its entries keep their owners and modes.
func (e *Engine) Archive(ctx context.Context, container, path string, w io.Writer) error {
	return e.do(ctx, "GET", "/containers/"+url.PathEscape(container)+"/archive?path="+url.QueryEscape(path), nil, w)
}

// Logs returns a container's output (stdout and stderr, interleaved), its
// last tail lines (0: all).
func (e *Engine) Logs(ctx context.Context, container string, tail int) (string, error) {
	t := "all"
	if tail > 0 {
		t = fmt.Sprint(tail)
	}
	var raw bytes.Buffer
	if err := e.do(ctx, "GET", "/containers/"+url.PathEscape(container)+"/logs?stdout=1&stderr=1&tail="+t, nil, &raw); err != nil {
		return "", err
	}
	var out strings.Builder
	b := raw.Bytes()
	for len(b) >= 8 { // multiplexed: an 8-byte header (stream, size), then the payload
		n := int(binary.BigEndian.Uint32(b[4:8]))
		if len(b) < 8+n {
			break
		}
		out.Write(b[8 : 8+n])
		b = b[8+n:]
	}
	return out.String(), nil
}

// Pause freezes every process of a container; Unpause thaws them.
func (e *Engine) Pause(ctx context.Context, id string) error {
	return e.do(ctx, "POST", "/containers/"+url.PathEscape(id)+"/pause", nil, nil)
}

// Unpause thaws a paused container.
func (e *Engine) Unpause(ctx context.Context, id string) error {
	return e.do(ctx, "POST", "/containers/"+url.PathEscape(id)+"/unpause", nil, nil)
}

// HealthyNames lists the names (without the leading /) of the running
// containers carrying label (k=v) whose health check passes.
func (e *Engine) HealthyNames(ctx context.Context, label string) ([]string, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}, "health": {"healthy"}})
	var out []struct{ Names []string }
	if err := e.do(ctx, "GET", "/containers/json?filters="+url.QueryEscape(string(f)), nil, &out); err != nil {
		return nil, err
	}
	var names []string
	for _, c := range out {
		for _, n := range c.Names {
			names = append(names, strings.TrimPrefix(n, "/"))
		}
	}
	return names, nil
}
