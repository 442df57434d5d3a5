// Command gitremote plays hosts on "the internet" for the e2e suite's
// egress tests, over HTTPS with certificates from the test's own CA (one
// per name it is asked for, by SNI):
//
//   - the git host: HTTP basic required (the credential only the gateway
//     holds), and git's own smart HTTP server (git http-backend, through
//     net/http/cgi) for two repositories, repo.git and work.git, pushes
//     enabled on both, so that a push the gateway let through would land;
//   - GITREMOTE_PYPI_HOST: a static PyPI simple index serving one wheel,
//     flockdemo 1.0, for pip;
//   - GITREMOTE_GOPROXY_HOST: a Go module proxy serving one module,
//     example.com/flockdemo v1.0.0, for the go command.
//
// Each request is logged as one JSON line: host, method, path, whether its
// credential was the right one (but /_ready, the test's readiness check).
//
//	GITREMOTE_ADDR   listen address (:443)
//	GITREMOTE_CA_SEED the test CA's seed, hex (protocol/egressca, flock "e2e-internet")
//	GITREMOTE_TOKEN  the password of user x-access-token
//	GITREMOTE_ROOT   where the repositories live (/srv/git)
//	GITREMOTE_MARKER the content of the repositories' README
//
// `gitremote ca` prints the test CA's certificate (PEM) for an egress
// rule's roots, and exits.
package main

import (
	"cmp"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ai-flock/ai-flock/protocol/egressca"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if len(os.Args) == 2 && os.Args[1] == "ca" {
		ca, err := testCA(os.Getenv)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gitremote:", err)
			os.Exit(1)
		}
		fmt.Print(ca.PEM())
		return
	}
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "gitremote:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	root := getenv("GITREMOTE_ROOT")
	if err := seed(root, getenv("GITREMOTE_MARKER")); err != nil {
		return fmt.Errorf("seeding the repository: %w", err)
	}
	ca, err := testCA(getenv)
	if err != nil {
		return err
	}
	pypiHost, goproxyHost := getenv("GITREMOTE_PYPI_HOST"), getenv("GITREMOTE_GOPROXY_HOST")
	files, err := packages(pypiHost, goproxyHost)
	if err != nil {
		return err
	}
	backend := &cgi.Handler{
		Path: "/usr/lib/git-core/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "HOME=/tmp"},
	}
	token := getenv("GITREMOTE_TOKEN")
	enc := json.NewEncoder(os.Stdout)
	srv := &http.Server{
		Addr: getenv("GITREMOTE_ADDR"),
		TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return ca.Leaf(cmp.Or(h.ServerName, "localhost"))
		}},
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/_ready" { // the test's readiness check, from inside this container: not logged
				w.WriteHeader(http.StatusNoContent)
				return
			}
			user, pass, ok := r.BasicAuth()
			authorized := ok && user == "x-access-token" && subtle.ConstantTimeCompare([]byte(pass), []byte(token)) == 1
			host, _, _ := strings.Cut(r.Host, ":")
			_ = enc.Encode(map[string]any{"host": host, "method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery, "authorized": authorized})
			if host == pypiHost || host == goproxyHost {
				// The package hosts are public: what they serve is files.
				f, ok := files[host+r.URL.Path]
				if !ok || r.Method != http.MethodGet {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", f.typ)
				_, _ = w.Write(f.body)
				return
			}
			if !authorized {
				w.Header().Set("WWW-Authenticate", `Basic realm="gitremote"`)
				http.Error(w, "who are you?", http.StatusUnauthorized)
				return
			}
			backend.ServeHTTP(w, r)
		}),
	}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.ListenAndServeTLS("", ""); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// testCA is the CA of GITREMOTE_CA_SEED.
func testCA(getenv func(string) string) (*egressca.CA, error) {
	seed, err := hex.DecodeString(getenv("GITREMOTE_CA_SEED"))
	if err != nil {
		return nil, fmt.Errorf("GITREMOTE_CA_SEED: %w", err)
	}
	return egressca.New(seed, "e2e-internet")
}

// seed makes root/repo.git and root/work.git, each one commit holding
// README with marker, pushes allowed (http.receivepack).
func seed(root, marker string) error {
	for _, name := range []string{"repo.git", "work.git"} {
		if err := seedOne(filepath.Join(root, name), filepath.Join(root, "work"), marker); err != nil {
			return err
		}
	}
	return nil
}

func seedOne(bare, work, marker string) error {
	env := append(os.Environ(), "HOME=/tmp", "GIT_AUTHOR_NAME=gitremote", "GIT_AUTHOR_EMAIL=gitremote@e2e.example",
		"GIT_COMMITTER_NAME=gitremote", "GIT_COMMITTER_EMAIL=gitremote@e2e.example")
	git := func(dir string, args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "README"), []byte(marker+"\n"), 0o644); err != nil {
		return err
	}
	for _, step := range [][]string{
		{filepath.Dir(bare), "init", "-q", "--bare", "-b", "main", bare},
		{bare, "config", "http.receivepack", "true"},
		{work, "init", "-q", "-b", "main"},
		{work, "add", "README"},
		{work, "commit", "-q", "-m", "the first commit"},
		{work, "push", "-q", bare, "main"},
	} {
		if err := git(step[0], step[1:]...); err != nil {
			return err
		}
	}
	return os.RemoveAll(work)
}
