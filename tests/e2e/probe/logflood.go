package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// logFlood: a hostile agent writes to the task's log as fast as it can for
// d, through every way it finds: each other process's stdout and stderr
// reopened through /proc/<pid>/fd, and taken with pidfd_getfd. It prints
// what it got, by pid, and the bytes it wrote, as JSON.
func logFlood(d time.Duration) {
	self := os.Getpid()
	type target struct {
		pid, fd int
		how     string
		w       func([]byte) error
	}
	var targets []target
	report := map[string]any{"self": self}
	refused := map[string]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		for _, fd := range []int{1, 2} {
			path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
			if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
				targets = append(targets, target{pid, fd, "reopen", func(b []byte) error { _, err := f.Write(b); return err }})
			} else {
				refused[fmt.Sprintf("reopen %d/%d", pid, fd)] = errText(err)
			}
			pidfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				refused[fmt.Sprintf("pidfd %d", pid)] = errText(err)
				continue
			}
			got, err := unix.PidfdGetfd(pidfd, fd, 0)
			unix.Close(pidfd)
			if err != nil {
				refused[fmt.Sprintf("take %d/%d", pid, fd)] = errText(err)
				continue
			}
			targets = append(targets, target{pid, fd, "take", func(b []byte) error { _, err := unix.Write(got, b); return err }})
		}
	}
	line := []byte(`{"level":"INFO","msg":"flood ` + strings.Repeat("x", 1000) + `"}` + "\n")
	written := map[string]int64{}
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, t := range targets {
			if t.w(line) == nil {
				written[fmt.Sprintf("%s %d/%d", t.how, t.pid, t.fd)] += int64(len(line))
			}
		}
		if len(targets) == 0 {
			break
		}
	}
	report["written"], report["refused"] = written, refused
	_ = json.NewEncoder(os.Stdout).Encode(report)
}

func errText(err error) string {
	if strings.Contains(err.Error(), ": ") {
		return err.Error()[strings.LastIndex(err.Error(), ": ")+2:]
	}
	return err.Error()
}
