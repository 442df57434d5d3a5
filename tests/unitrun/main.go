// Command unitrun runs the unit and mock-engine tests (`make test`): every
// package's tests but the Docker suites, in -short mode, results never
// cached.
//
// `go test` links every test binary again on every run, and on 2 cores that
// linking was most of the step (about 55 of its 82 CPU-seconds; the five
// SDK-heavy binaries are 90-115 MB). Here each binary is built with
// `go test -c` into a directory kept between runs: the go command relinks a
// binary only when its build ID changed (the package, or anything it is
// built from), so a second run links nothing and a change relinks only the
// binaries it reaches. They are stripped (-s -w): a third less to link, and
// a panic still prints file and line. Then each runs in its package's
// directory, as `go test` runs it, up to -jobs at once.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// excluded are the Docker suites: they run nothing without an engine, and
// `make check` runs them.
var excluded = regexp.MustCompile(`/tests/e2e(/cluster|/fargate)?$`)

type pkg struct {
	ImportPath, Dir           string
	TestGoFiles, XTestGoFiles []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "unitrun:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	jobs := flag.Int("jobs", 8, "test binaries run at once (as go test -p)")
	binFlag := flag.String("bin", os.Getenv("FLOCK_TEST_BIN"), "where the test binaries are kept (default: the user's cache, one directory per checkout)")
	flag.Parse()
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}

	pkgs, err := testPackages(ctx, goCmd)
	if err != nil {
		return err
	}
	bin, err := binDir(*binFlag)
	if err != nil {
		return err
	}
	// go test -c -o DIR/ names a binary after its package's last path
	// element: two packages ending alike would overwrite each other's.
	byName := map[string]string{}
	args := []string{"test", "-c", "-o", bin + string(filepath.Separator), "-vet=off", "-ldflags=-s -w"}
	for _, p := range pkgs {
		name := filepath.Base(p.ImportPath)
		if other, ok := byName[name]; ok {
			return fmt.Errorf("%s and %s end in the same name: their test binaries would overwrite each other; rename one", other, p.ImportPath)
		}
		byName[name] = p.ImportPath
		args = append(args, p.ImportPath)
	}
	build := exec.CommandContext(ctx, goCmd, args...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the test binaries: %w", err)
	}

	// Run them, and print each package's line in the list's order as soon
	// as it and those before it are done.
	done := make([]chan string, len(pkgs))
	failed := make([]bool, len(pkgs))
	sem := make(chan struct{}, max(1, *jobs))
	var wg sync.WaitGroup
	for i, p := range pkgs {
		done[i] = make(chan string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var out string
			out, failed[i] = runOne(ctx, p, filepath.Join(bin, filepath.Base(p.ImportPath)+".test"))
			done[i] <- out
		}()
	}
	bad := 0
	for i := range pkgs {
		fmt.Print(<-done[i])
		if failed[i] {
			bad++
		}
	}
	wg.Wait()
	if bad > 0 {
		fmt.Println("FAIL")
		return fmt.Errorf("%d of %d packages failed", bad, len(pkgs))
	}
	return nil
}

// testPackages lists the module's packages that have tests, but the
// Docker suites.
func testPackages(ctx context.Context, goCmd string) ([]pkg, error) {
	out, err := exec.CommandContext(ctx, goCmd, "list", "-json", "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list: %w\n%s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 && !excluded.MatchString(p.ImportPath) {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// binDir is where this checkout's binaries are kept: outside it (the VM's
// synced folder and the image contexts stay small), one directory per
// checkout (two worktrees never write one binary). Those of checkouts that
// are gone go with them.
func binDir(flagged string) (string, error) {
	if flagged != "" {
		return flagged, os.MkdirAll(flagged, 0o755)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the test binaries (set FLOCK_TEST_BIN): %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if wd, err = filepath.EvalSymlinks(wd); err != nil {
		return "", err
	}
	root := filepath.Join(cache, "ai-flock", "test-bin")
	sum := sha256.Sum256([]byte(wd))
	dir := filepath.Join(root, hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "checkout"), []byte(wd), 0o644); err != nil {
		return "", err
	}
	others, _ := os.ReadDir(root)
	for _, o := range others {
		b, err := os.ReadFile(filepath.Join(root, o.Name(), "checkout"))
		if err != nil {
			continue
		}
		if _, err := os.Stat(string(b)); errors.Is(err, os.ErrNotExist) {
			_ = os.RemoveAll(filepath.Join(root, o.Name()))
		}
	}
	return dir, nil
}

// runOne runs a package's test binary in its directory; it returns what
// to print (go test's summary line, and the output when it failed).
func runOne(ctx context.Context, p pkg, binary string) (string, bool) {
	if _, err := os.Stat(binary); err != nil {
		return "", false // all its tests are in files this build leaves out
	}
	cmd := exec.CommandContext(ctx, binary, "-test.short", "-test.paniconexit0", "-test.timeout=10m0s")
	cmd.Dir = p.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Seconds()
	if err != nil {
		return fmt.Sprintf("%s%sFAIL\t%s\t%.3fs (%v)\n", out.String(), nl(out.String()), p.ImportPath, took, err), true
	}
	return fmt.Sprintf("ok  \t%s\t%.3fs\n", p.ImportPath, took), false
}

func nl(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return ""
	}
	return "\n"
}
