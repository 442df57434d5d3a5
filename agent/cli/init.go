package cli

import (
	"flag"
	"fmt"
	"os"

	"github.com/ai-flock/ai-flock/agent/logbound"
	"github.com/ai-flock/ai-flock/agent/pid1"
)

// initCmd is `flock-agent init [--rate B] [--burst B] [--max-line B] [--
// COMMAND...]`: the agent task's PID 1 on aws (agent/pid1), running
// COMMAND (default: this binary's `run`) with its output bounded.
func initCmd(args []string, sio IO) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(sio.Err)
	var lim logbound.Limits
	fs.IntVar(&lim.Rate, "rate", logbound.DefaultRate, "bytes a second of output, on average")
	fs.IntVar(&lim.Burst, "burst", logbound.DefaultBurst, "bytes of output at once, above the average")
	fs.IntVar(&lim.MaxLine, "max-line", logbound.DefaultMaxLine, "bytes of one line; the rest is cut")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if lim.Rate <= 0 || lim.Burst <= 0 || lim.MaxLine <= 0 {
		fmt.Fprintln(sio.Err, "flock-agent init: --rate, --burst and --max-line must be positive")
		return ExitUsage
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(sio.Err, "flock-agent init: %v\n", err)
			return ExitUsage
		}
		cmd = []string{self, "run"}
	}
	return pid1.Run(pid1.Config{Args: cmd, Env: os.Environ(), Limits: lim, Out: sio.Out})
}
