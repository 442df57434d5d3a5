package flock

import (
	"io/fs"
	"reflect"
	"testing"
	"testing/fstest"
)

// ImageFileErrors: a Dockerfile that is not a file, a context that is not a
// directory, each named by its key, once per configured image; base images
// and the stock image are not looked at.
func TestImageFileErrors(t *testing.T) {
	fsys := fstest.MapFS{
		"ok/Dockerfile":  {Data: []byte("FROM scratch\n")},
		"dir/Dockerfile": {Mode: fs.ModeDir},
		"file":           {Data: []byte("x")},
	}
	var looked []string
	stat := func(p string) (fs.FileInfo, error) {
		looked = append(looked, p)
		return fs.Stat(fsys, p)
	}
	own := func(key, df, ctx string) Agent {
		return Agent{Image: Image{Dockerfile: df, Context: ctx, ConfigKey: key}}
	}
	agents := []Agent{
		{},
		{Image: Image{Base: "python:3.12-slim", ConfigKey: "flock:agents[1].image"}},
		own("flock:image", "ok/Dockerfile", "ok"),
		own("flock:image", "ok/Dockerfile", "ok"),
		own("flock:agents[4].image", "dir/Dockerfile", "file"),
		own("flock:agents[5].image", "no/Dockerfile", "no"),
	}
	var got []string
	for _, err := range ImageFileErrors(agents, stat) {
		got = append(got, err.Error())
	}
	want := []string{
		`flock:agents[4].image.dockerfile: "dir/Dockerfile" is not a file here (paths are relative to the project directory)`,
		`flock:agents[4].image.context: "file" is not a directory here (paths are relative to the project directory)`,
		`flock:agents[5].image.dockerfile: "no/Dockerfile" is not a file here (paths are relative to the project directory)`,
		`flock:agents[5].image.context: "no" is not a directory here (paths are relative to the project directory)`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors\n got %q\nwant %q", got, want)
	}
	if want := []string{"ok/Dockerfile", "ok", "dir/Dockerfile", "file", "no/Dockerfile", "no"}; !reflect.DeepEqual(looked, want) {
		t.Errorf("looked at %q, want %q (each configured image once)", looked, want)
	}
}
