package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
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

// inspect reads the inspect document at path.
func (e *Engine) inspect(ctx context.Context, path string) (map[string]any, error) {
	var out map[string]any
	err := e.do(ctx, "GET", path, nil, &out)
	return out, err
}

// labelled lists the IDs in the listing at path (which ends in "filters=")
// of the objects carrying label (k=v).
func (e *Engine) labelled(ctx context.Context, path, label string) ([]string, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	var out []idOnly
	err := e.do(ctx, "GET", path+url.QueryEscape(string(f)), nil, &out)
	return ids(out), err
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
