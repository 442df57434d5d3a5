// Package tool is a handful of tiny programs built into the agent binary
// (`flock-agent tool <name>`): the agent image is FROM scratch, so exec tasks
// in tests, benchmarks and probes need something to run.
package tool

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

var usage = `usage: flock-agent tool <name> [args]
  echo ARGS...          print ARGS
  cat                   copy stdin to stdout
  sleep D [--mark F]    sleep D ("2s" or seconds), writing file F first
  exit N                exit with status N
  env                   print the environment, sorted
  pwd                   print the working directory
  ls [DIR]              list DIR
  read FILE             print FILE
  write FILE TEXT       write TEXT to FILE
  output N              write N bytes to stdout
  spin D                burn CPU for D
  alloc MIB [D]         allocate and touch MIB MiB, hold for D
  fork-bomb [N] [D]     try to start N processes (default 1000) that live D
                        (default 5s); print how many started, then stop them
`

// Main runs tool args[0] with args[1:] and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "tool %s: %v\n", args[0], err)
		return 1
	}
	a := args[1:]
	switch args[0] {
	case "echo":
		fmt.Fprintln(stdout, strings.Join(a, " "))
	case "cat":
		if _, err := io.Copy(stdout, stdin); err != nil {
			return fail(err)
		}
	case "sleep":
		if len(a) == 0 {
			return fail(fmt.Errorf("want a duration"))
		}
		d, err := duration(a[0])
		if err != nil {
			return fail(err)
		}
		if len(a) == 3 && a[1] == "--mark" {
			if err := os.WriteFile(a[2], []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
				return fail(err)
			}
		}
		time.Sleep(d)
	case "exit":
		if len(a) == 0 {
			return fail(fmt.Errorf("want a status"))
		}
		n, err := strconv.Atoi(a[0])
		if err != nil {
			return fail(err)
		}
		return n
	case "env":
		env := os.Environ()
		sort.Strings(env)
		for _, kv := range env {
			fmt.Fprintln(stdout, kv)
		}
	case "pwd":
		wd, err := os.Getwd()
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, wd)
	case "ls":
		dir := "."
		if len(a) > 0 {
			dir = a[0]
		}
		es, err := os.ReadDir(dir)
		if err != nil {
			return fail(err)
		}
		for _, e := range es {
			fmt.Fprintln(stdout, e.Name())
		}
	case "read":
		if len(a) != 1 {
			return fail(fmt.Errorf("want FILE"))
		}
		b, err := os.ReadFile(a[0])
		if err != nil {
			return fail(err)
		}
		_, _ = stdout.Write(b)
	case "write":
		if len(a) != 2 {
			return fail(fmt.Errorf("want FILE TEXT"))
		}
		if err := os.WriteFile(a[0], []byte(a[1]), 0o600); err != nil {
			return fail(err)
		}
	case "output":
		if len(a) != 1 {
			return fail(fmt.Errorf("want N"))
		}
		n, err := strconv.ParseInt(a[0], 10, 64)
		if err != nil {
			return fail(err)
		}
		line := []byte(strings.Repeat("x", 63) + "\n")
		for n > 0 {
			k := min(n, int64(len(line)))
			if _, err := stdout.Write(line[:k]); err != nil {
				return fail(err)
			}
			n -= k
		}
	case "spin":
		d, err := duration(firstOr(a, "1s"))
		if err != nil {
			return fail(err)
		}
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	case "alloc":
		mib, err := strconv.Atoi(firstOr(a, "1"))
		if err != nil {
			return fail(err)
		}
		hold := time.Duration(0)
		if len(a) > 1 {
			if hold, err = duration(a[1]); err != nil {
				return fail(err)
			}
		}
		b := make([]byte, mib<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		time.Sleep(hold)
		fmt.Fprintf(stdout, "allocated %d MiB\n", len(b)>>20)
	case "fork-bomb":
		return forkBomb(a, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "tool: unknown tool %q\n%s", args[0], usage)
		return 2
	}
	return 0
}

// forkBomb starts up to n sleeping copies of this binary and reports how
// many the process limit allowed; it always stops them before returning.
func forkBomb(a []string, stdout, stderr io.Writer) int {
	n, hold := 1000, 5*time.Second
	if len(a) > 0 {
		v, err := strconv.Atoi(a[0])
		if err != nil || v < 1 {
			fmt.Fprintln(stderr, "tool fork-bomb: N must be a positive integer")
			return 2
		}
		n = v
	}
	if len(a) > 1 {
		d, err := duration(a[1])
		if err != nil {
			fmt.Fprintln(stderr, "tool fork-bomb:", err)
			return 2
		}
		hold = d
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "tool fork-bomb:", err)
		return 1
	}
	var procs []*exec.Cmd
	out := struct {
		Wanted  int    `json:"wanted"`
		Started int    `json:"started"`
		Error   string `json:"error,omitempty"`
	}{Wanted: n}
	for range n {
		c := exec.Command(self, "tool", "sleep", hold.String())
		if err := c.Start(); err != nil {
			out.Error = err.Error()
			break
		}
		procs = append(procs, c)
	}
	out.Started = len(procs)
	for _, c := range procs {
		_ = c.Process.Kill()
	}
	for _, c := range procs {
		_ = c.Wait()
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(b))
	return 0
}

func duration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 2s or a number of seconds (got %q)", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func firstOr(a []string, def string) string {
	if len(a) > 0 {
		return a[0]
	}
	return def
}
