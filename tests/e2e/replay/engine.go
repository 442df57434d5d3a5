package replay

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Engine is a small Docker Engine API client: the calls the docker provider
// makes to create what the flock declares, and the ones the probes need.
type Engine struct {
	http *http.Client
	base string
}

// APIVersion is the Engine API version used (Docker 20.10 speaks 1.41).
const APIVersion = "v1.41"

// NewEngine connects to DOCKER_HOST (unix sockets only) or /var/run/docker.sock.
func NewEngine() (*Engine, error) {
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			return nil, fmt.Errorf("replay: DOCKER_HOST %q: only unix:// engines are supported", h)
		}
		sock = strings.TrimPrefix(h, "unix://")
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &Engine{http: &http.Client{Transport: tr}, base: "http://docker/" + APIVersion}, nil
}

// APIError is an error answer of the engine.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("engine: %d %s", e.Status, e.Message) }

// IsRemovalInProgress reports a 409 answer to a removal the engine is
// already making (the container goes anyway).
func IsRemovalInProgress(err error) bool {
	ae, ok := err.(*APIError)
	return ok && ae.Status == http.StatusConflict && strings.Contains(ae.Message, "already in progress")
}

// IsNotFound reports a 404 answer.
func IsNotFound(err error) bool {
	ae, ok := err.(*APIError)
	return ok && ae.Status == http.StatusNotFound
}

func (e *Engine) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd, ctype = b, "application/x-tar"
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.base+path, rd)
	if err != nil {
		return err
	}
	if rd != nil {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(resp.Body)
		var m struct{ Message string }
		if json.Unmarshal(raw, &m) != nil || m.Message == "" {
			m.Message = strings.TrimSpace(string(raw))
		}
		return &APIError{Status: resp.StatusCode, Message: m.Message}
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if w, ok := out.(io.Writer); ok {
		_, err = io.Copy(w, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Arch is the engine's CPU architecture, as a GOARCH (amd64, arm64).
func (e *Engine) Arch(ctx context.Context) (string, error) {
	var v struct{ Arch string }
	if err := e.do(ctx, "GET", "/version", nil, &v); err != nil {
		return "", err
	}
	if v.Arch == "" {
		return "", fmt.Errorf("engine: /version names no architecture")
	}
	return v.Arch, nil
}

// Ping checks the engine answers.
func (e *Engine) Ping(ctx context.Context) error { return e.do(ctx, "GET", "/_ping", nil, nil) }

// HasRuntime reports whether the engine has an OCI runtime of that name
// registered (docker info's Runtimes: runc, and runsc where gVisor is).
func (e *Engine) HasRuntime(ctx context.Context, name string) (bool, error) {
	var v struct{ Runtimes map[string]any }
	if err := e.do(ctx, "GET", "/info", nil, &v); err != nil {
		return false, err
	}
	_, ok := v.Runtimes[name]
	return ok, nil
}

// Build builds an image from a context directory (honouring simple
// .dockerignore patterns) and returns its ID.
func (e *Engine) Build(ctx context.Context, dir, dockerfile, target, tag string, args map[string]string, labels map[string]string) (string, error) {
	tarball, err := tarContext(dir)
	if err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("dockerfile", dockerfile)
	q.Set("t", tag)
	q.Set("rm", "1")
	q.Set("forcerm", "1")
	if target != "" {
		q.Set("target", target)
	}
	if len(args) > 0 {
		b, _ := json.Marshal(args)
		q.Set("buildargs", string(b))
	}
	if len(labels) > 0 {
		b, _ := json.Marshal(labels)
		q.Set("labels", string(b))
	}
	var out bytes.Buffer
	if err := e.do(ctx, "POST", "/build?"+q.Encode(), tarball, &out); err != nil {
		return "", err
	}
	// The build streams JSON lines; an error arrives as {"error": ...}.
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Error != "" {
			return "", fmt.Errorf("build %s: %s", tag, line.Error)
		}
	}
	var img struct {
		ID string `json:"Id"`
	}
	if err := e.do(ctx, "GET", "/images/"+url.PathEscape(tag)+"/json", nil, &img); err != nil {
		return "", err
	}
	return img.ID, nil
}

func tarContext(dir string) (io.Reader, error) {
	var ignore []string
	if raw, err := os.ReadFile(filepath.Join(dir, ".dockerignore")); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				ignore = append(ignore, l)
			}
		}
	}
	// As the engine reads it: the last pattern that matches decides, "!"
	// re-includes, and a pattern matches a path when it matches the path or
	// any directory above it (so "*" excludes bin/x unless "!bin/x" follows).
	matches := func(p, rel string) bool {
		for q := rel; q != "."; q = filepath.Dir(q) {
			if m, _ := filepath.Match(p, q); m {
				return true
			}
		}
		return false
	}
	ignored := func(rel string) bool {
		out := false
		for _, p := range ignore {
			neg := strings.HasPrefix(p, "!")
			p = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/"), "/")
			if matches(p, rel) {
				out = !neg
			}
		}
		return out
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if rel != "Dockerfile" && ignored(rel) {
			return nil // a directory's children may still be re-included by a ! pattern
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

// CreateNetwork creates a network and returns its ID.
func (e *Engine) CreateNetwork(ctx context.Context, req map[string]any) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	err := e.do(ctx, "POST", "/networks/create", req, &out)
	return out.ID, err
}

// ConnectNetwork attaches a container to a network.
func (e *Engine) ConnectNetwork(ctx context.Context, network, container string, endpoint map[string]any) error {
	return e.do(ctx, "POST", "/networks/"+url.PathEscape(network)+"/connect", map[string]any{"Container": container, "EndpointConfig": endpoint}, nil)
}

// DisconnectNetwork detaches a container from a network.
func (e *Engine) DisconnectNetwork(ctx context.Context, network, container string) error {
	return e.do(ctx, "POST", "/networks/"+url.PathEscape(network)+"/disconnect", map[string]any{"Container": container, "Force": true}, nil)
}

// RemoveNetwork deletes a network.
func (e *Engine) RemoveNetwork(ctx context.Context, id string) error {
	return e.do(ctx, "DELETE", "/networks/"+url.PathEscape(id), nil, nil)
}

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
	var out map[string]any
	err := e.do(ctx, "GET", "/containers/"+url.PathEscape(id)+"/json", nil, &out)
	return out, err
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

// RemoveImage removes an image by name or ID (an image that is gone is no error).
func (e *Engine) RemoveImage(ctx context.Context, name string) error {
	err := e.do(ctx, "DELETE", "/images/"+url.PathEscape(name)+"?force=1", nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// InspectNetwork returns a network's inspect document.
func (e *Engine) InspectNetwork(ctx context.Context, id string) (map[string]any, error) {
	var out map[string]any
	err := e.do(ctx, "GET", "/networks/"+url.PathEscape(id), nil, &out)
	return out, err
}

type idOnly struct {
	ID string `json:"Id"`
}

func ids(l []idOnly) []string {
	out := make([]string, len(l))
	for i, c := range l {
		out[i] = c.ID
	}
	return out
}

// ListContainers lists containers (all states) carrying label (k=v).
func (e *Engine) ListContainers(ctx context.Context, label string) ([]string, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	var out []idOnly
	err := e.do(ctx, "GET", "/containers/json?all=1&filters="+url.QueryEscape(string(f)), nil, &out)
	return ids(out), err
}

// ListNetworks lists networks carrying label (k=v).
func (e *Engine) ListNetworks(ctx context.Context, label string) ([]string, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	var out []idOnly
	err := e.do(ctx, "GET", "/networks?filters="+url.QueryEscape(string(f)), nil, &out)
	return ids(out), err
}

// ExecResult is the outcome of a command run in a container.
type ExecResult struct {
	ExitCode       int
	Stdout, Stderr string
}

// Exec runs cmd in a running container as its configured user and waits.
func (e *Engine) Exec(ctx context.Context, container string, cmd []string, env ...string) (ExecResult, error) {
	var created idOnly
	if err := e.do(ctx, "POST", "/containers/"+url.PathEscape(container)+"/exec",
		map[string]any{"Cmd": cmd, "AttachStdout": true, "AttachStderr": true, "Env": env}, &created); err != nil {
		return ExecResult{}, err
	}
	var raw bytes.Buffer
	if err := e.do(ctx, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": false, "Tty": false}, &raw); err != nil {
		return ExecResult{}, err
	}
	var res ExecResult
	var stdout, stderr strings.Builder
	b := raw.Bytes()
	for len(b) >= 8 { // multiplexed stream: an 8-byte header (stream, size), then the payload
		n := int(binary.BigEndian.Uint32(b[4:8]))
		if len(b) < 8+n {
			break
		}
		if b[0] == 2 {
			stderr.Write(b[8 : 8+n])
		} else {
			stdout.Write(b[8 : 8+n])
		}
		b = b[8+n:]
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	for i := 0; i < 100; i++ {
		var st struct {
			Running  bool
			ExitCode int
		}
		if err := e.do(ctx, "GET", "/exec/"+created.ID+"/json", nil, &st); err != nil {
			return res, err
		}
		if !st.Running {
			res.ExitCode = st.ExitCode
			return res, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return res, fmt.Errorf("exec %v in %s: still running", cmd, container)
}

// ExecDetached starts cmd in a container and returns at once.
func (e *Engine) ExecDetached(ctx context.Context, container string, cmd []string) error {
	var created idOnly
	if err := e.do(ctx, "POST", "/containers/"+url.PathEscape(container)+"/exec", map[string]any{"Cmd": cmd}, &created); err != nil {
		return err
	}
	return e.do(ctx, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true}, nil)
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

// InspectImage returns an image's inspect document.
func (e *Engine) InspectImage(ctx context.Context, id string) (map[string]any, error) {
	var out map[string]any
	err := e.do(ctx, "GET", "/images/"+url.PathEscape(id)+"/json", nil, &out)
	return out, err
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

// ListImages lists image IDs carrying label (k=v).
func (e *Engine) ListImages(ctx context.Context, label string) ([]string, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	var out []idOnly
	err := e.do(ctx, "GET", "/images/json?filters="+url.QueryEscape(string(f)), nil, &out)
	return ids(out), err
}
