package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// file is one file a package host serves.
type file struct {
	typ  string
	body []byte
}

// The one package each host serves.
const (
	wheelName = "flockdemo-1.0-py3-none-any.whl"
	goModule  = "example.com/flockdemo"
	goVersion = "v1.0.0"
)

// packages are the package hosts' files, by host and path: PyPI's simple
// index for flockdemo and its wheel, and the Go module proxy's list, info,
// go.mod and zip for example.com/flockdemo v1.0.0.
func packages(pypi, gop string) (map[string]file, error) {
	wheel, err := zipOf(map[string]string{
		"flockdemo/__init__.py":                 "ANSWER = 42\n",
		"flockdemo-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: flockdemo\nVersion: 1.0\n",
		"flockdemo-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nGenerator: gitremote\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"flockdemo-1.0.dist-info/RECORD":        "",
		"flockdemo-1.0.dist-info/top_level.txt": "flockdemo\n",
	})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wheel)
	mod := "module " + goModule + "\n\ngo 1.21\n"
	modZip, err := zipOf(map[string]string{
		goModule + "@" + goVersion + "/go.mod":       mod,
		goModule + "@" + goVersion + "/flockdemo.go": "// Package flockdemo is what the e2e suite's Go module proxy serves.\npackage flockdemo\n\nconst Answer = 42\n",
	})
	if err != nil {
		return nil, err
	}
	at := "/" + goModule + "/@v/"
	return map[string]file{
		pypi + "/simple/flockdemo/":    {"text/html", []byte(fmt.Sprintf(`<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, wheelName, hex.EncodeToString(sum[:]), wheelName))},
		pypi + "/files/" + wheelName:   {"application/octet-stream", wheel},
		gop + at + "list":              {"text/plain", []byte(goVersion + "\n")},
		gop + at + goVersion + ".info": {"application/json", []byte(`{"Version":"` + goVersion + `","Time":"2026-01-01T00:00:00Z"}`)},
		gop + at + goVersion + ".mod":  {"text/plain", []byte(mod)},
		gop + at + goVersion + ".zip":  {"application/zip", modZip},
	}, nil
}

// zipOf is a zip of the given files (no directory entries: the go command
// refuses them).
func zipOf(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(body)); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
