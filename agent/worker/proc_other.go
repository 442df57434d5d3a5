//go:build !unix

package worker

import (
	"os"
	"os/exec"
)

func killGroup(cmd *exec.Cmd) {}

func signalOf(ps *os.ProcessState) string { return "" }
