package flock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// Image is the image an agent runs: the stock one (zero value), or one made
// from the user's own base image or Dockerfile, with flock-agent added as
// its entrypoint by the stack. The hardening is the stack's, whatever the
// image: the agent's UID, a read-only root, no capabilities, the limits.
type Image struct {
	// Base is an image the engine has or can pull: flock-agent goes on top.
	Base string
	// Dockerfile and Context build the user's image first (Context defaults
	// to the Dockerfile's directory); flock-agent goes on top of that.
	Dockerfile string
	Context    string
	// ConfigKey is the key it was configured under, for errors.
	ConfigKey string
}

// Stock reports whether this is the flock's stock agent image.
func (i Image) Stock() bool { return i.Base == "" && i.Dockerfile == "" }

// Key names the image among a flock's images: the same spec, the same image.
func (i Image) Key() string {
	if i.Stock() {
		return ""
	}
	sum := sha256.Sum256([]byte(i.Base + "\x00" + i.Dockerfile + "\x00" + i.Context))
	return hex.EncodeToString(sum[:4])
}

// ImageConfig is flock:image and flock:agents[].image.
type ImageConfig struct {
	Base       string `json:"base"`
	Dockerfile string `json:"dockerfile"`
	Context    string `json:"context"`
}

// imageRef is a Docker image reference: [registry/]name[:tag][@digest].
var imageRef = regexp.MustCompile(`^[a-z0-9]+([._/:-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

func (c *ImageConfig) validate(es *errs, key string) Image {
	if c == nil {
		return Image{}
	}
	switch {
	case c.Base != "" && c.Dockerfile != "":
		es.add(key, "set base (an image flock-agent goes on top of) or dockerfile (built first), not both")
		return Image{}
	case c.Base == "" && c.Dockerfile == "":
		es.add(key, "needs base (an image such as python:3.12-slim) or dockerfile (a path such as agents/python/Dockerfile)")
		return Image{}
	case c.Base != "":
		if c.Context != "" {
			es.add(key+".context", "goes with dockerfile, not base")
			return Image{}
		}
		if !imageRef.MatchString(c.Base) || len(c.Base) > 255 {
			es.add(key+".base", "must be an image reference such as python:3.12-slim or registry.example.com/team/agent:1.4 (got %q)", c.Base)
			return Image{}
		}
		return Image{Base: c.Base, ConfigKey: key}
	}
	clean := func(k, p string) bool {
		if p == "" || strings.ContainsAny(p, "\x00\n\r") || path.Clean(p) != p {
			es.add(k, "must be a clean path, relative to the project or absolute (got %q)", p)
			return false
		}
		return true
	}
	ctx := c.Context
	if ctx == "" {
		ctx = path.Dir(c.Dockerfile)
	}
	if !clean(key+".dockerfile", c.Dockerfile) || !clean(key+".context", ctx) {
		return Image{}
	}
	return Image{Dockerfile: c.Dockerfile, Context: ctx, ConfigKey: key}
}

// ImageFileErrors reports the own images whose Dockerfile is not a file or
// whose context is not a directory, once per configured image (its
// ConfigKey), each error naming the key. stat is os.Stat where the images
// are built (the program's directory: paths are relative to the project).
// Each component that builds images calls it from its own checks.
func ImageFileErrors(agents []Agent, stat func(string) (fs.FileInfo, error)) []error {
	var errs []error
	seen := map[string]bool{}
	for _, a := range agents {
		img := a.Image
		if img.Dockerfile == "" || seen[img.ConfigKey] {
			continue
		}
		seen[img.ConfigKey] = true
		if st, err := stat(img.Dockerfile); err != nil || st.IsDir() {
			errs = append(errs, &Error{Key: img.ConfigKey + ".dockerfile", Rule: fmt.Sprintf("%q is not a file here (paths are relative to the project directory)", img.Dockerfile)})
		}
		if st, err := stat(img.Context); err != nil || !st.IsDir() {
			errs = append(errs, &Error{Key: img.ConfigKey + ".context", Rule: fmt.Sprintf("%q is not a directory here (paths are relative to the project directory)", img.Context)})
		}
	}
	return errs
}
