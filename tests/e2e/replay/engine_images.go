// The engine's images: built from a context directory, inspected, listed,
// removed.

package replay

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

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

// RemoveImage removes an image by name or ID (an image that is gone is no error).
func (e *Engine) RemoveImage(ctx context.Context, name string) error {
	err := e.do(ctx, "DELETE", "/images/"+url.PathEscape(name)+"?force=1", nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// InspectImage returns an image's inspect document.
func (e *Engine) InspectImage(ctx context.Context, id string) (map[string]any, error) {
	return e.inspect(ctx, "/images/"+url.PathEscape(id)+"/json")
}

// ListImages lists image IDs carrying label (k=v).
func (e *Engine) ListImages(ctx context.Context, label string) ([]string, error) {
	return e.labelled(ctx, "/images/json?filters=", label)
}
