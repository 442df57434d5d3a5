// Commands run in a running container.

package replay

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ExecResult is the outcome of a command run in a container.
type ExecResult struct {
	ExitCode       int
	Stdout, Stderr string
}

// Exec runs cmd in a running container as its configured user and waits.
func (e *Engine) Exec(ctx context.Context, container string, cmd []string, env ...string) (ExecResult, error) {
	var created idOnly
	if err := e.do(ctx, "POST", "/containers/"+url.PathEscape(container)+"/exec",
		map[string]any{"Cmd": cmd, "AttachStdout": true, "AttachStderr": true, "Env": env}, &created); err != nil {
		return ExecResult{}, err
	}
	var raw bytes.Buffer
	if err := e.do(ctx, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": false, "Tty": false}, &raw); err != nil {
		return ExecResult{}, err
	}
	var res ExecResult
	var stdout, stderr strings.Builder
	b := raw.Bytes()
	for len(b) >= 8 { // multiplexed stream: an 8-byte header (stream, size), then the payload
		n := int(binary.BigEndian.Uint32(b[4:8]))
		if len(b) < 8+n {
			break
		}
		if b[0] == 2 {
			stderr.Write(b[8 : 8+n])
		} else {
			stdout.Write(b[8 : 8+n])
		}
		b = b[8+n:]
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	for i := 0; i < 100; i++ {
		var st struct {
			Running  bool
			ExitCode int
		}
		if err := e.do(ctx, "GET", "/exec/"+created.ID+"/json", nil, &st); err != nil {
			return res, err
		}
		if !st.Running {
			res.ExitCode = st.ExitCode
			return res, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return res, fmt.Errorf("exec %v in %s: still running", cmd, container)
}

// ExecDetached starts cmd in a container and returns at once.
func (e *Engine) ExecDetached(ctx context.Context, container string, cmd []string) error {
	var created idOnly
	if err := e.do(ctx, "POST", "/containers/"+url.PathEscape(container)+"/exec", map[string]any{"Cmd": cmd}, &created); err != nil {
		return err
	}
	return e.do(ctx, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true}, nil)
}
