package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/mcpserver"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// mcpCmd serves MCP over stdin/stdout: the agent's server (inside its
// container, as that agent) or, with --operator, the operator's. stdout
// carries the protocol, so diagnostics go to stderr only.
func mcpCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("mcp", env, sio)
	asOperator := o.fs.Bool("operator", false, "serve the operator's tools with the operator key (--nkey or $FLOCK_NKEY_SEED) instead of an agent's")
	if code, ok := o.parse(args); !ok {
		return code
	}
	if o.fs.NArg() > 0 {
		fmt.Fprintln(sio.Err, "usage: flock-agent mcp [--operator] [--nats URL] [--nkey FILE]")
		return ExitUsage
	}
	transport := &mcp.IOTransport{Reader: io.NopCloser(sio.In), Writer: nopWriteCloser{sio.Out}}
	if *asOperator {
		return o.run(ctx, 0, func(ctx context.Context, cl *operator.Client) (int, error) {
			srv, err := mcpserver.NewOperator(ctx, cl, Version)
			if err != nil {
				fmt.Fprintln(sio.Err, "flock-agent mcp:", err)
				return ExitBus, nil
			}
			return serveMCP(ctx, srv.Server, transport, sio), nil
		})
	}

	cfg, nc, code := agentMCPConn(env, sio, "flock-agent mcp")
	if nc == nil {
		return code
	}
	defer nc.Close()
	return serveMCP(ctx, mcpserver.NewAgent(nc, cfg), transport, sio)
}

func serveMCP(ctx context.Context, s *mcp.Server, t mcp.Transport, sio IO) int {
	// The session ends when the client closes stdin (io.EOF): a normal end.
	if err := s.Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(sio.Err, "flock-agent mcp:", err)
		return ExitBus
	}
	return ExitOK
}

// agentMCPConn connects as the agent the environment names. Inside a task the
// agent sets FLOCK_AGENT_ID, FLOCK_NATS_URL, FLOCK_NKEY_FILE and
// FLOCK_SHARED_DIR; the agent's own variables (AGENT_ID, NATS_URL, ...) are
// the fallback, so the server also runs from an exec in the container.
// name starts its error messages (the command).
func agentMCPConn(env Env, sio IO, name string) (mcpserver.AgentConfig, *nats.Conn, int) {
	pick := func(def string, names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(env(n)); v != "" {
				return v
			}
		}
		return def
	}
	cfg := mcpserver.AgentConfig{
		ID:          pick("", "FLOCK_AGENT_ID", protocol.EnvAgentID),
		TaskID:      env("FLOCK_TASK_ID"),
		TaskDir:     env("FLOCK_TASK_DIR"),
		TaskAttempt: env("FLOCK_TASK_ATTEMPT"),
		Version:     Version,
	}
	url := pick(worker.DefaultURL, protocol.EnvCLINATSURL, protocol.EnvNATSURL)
	keyFile := pick(worker.DefaultNkeyFile, protocol.EnvCLINkeyFile, protocol.EnvNkeyFile)
	shared := pick(worker.DefaultSharedDir, "FLOCK_SHARED_DIR", protocol.EnvSharedDir)
	if cfg.ID == "" {
		fmt.Fprintln(sio.Err, name+": FLOCK_AGENT_ID: required (the agent sets it for its tasks; or use --operator)")
		return cfg, nil, ExitUsage
	}
	cfg.AgentDir = filepath.Join(shared, "agents", cfg.ID)
	nk, err := nats.NkeyOptionFromSeed(keyFile)
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: FLOCK_NKEY_FILE %s: %v\n", name, keyFile, err)
		return cfg, nil, ExitUsage
	}
	nc, err := nats.Connect(url, nk,
		nats.Name(strings.ReplaceAll(name, " ", "-")+"/"+cfg.ID),
		nats.CustomInboxPrefix(protocol.InboxPrefix(cfg.ID)),
		nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectBufSize(1<<20))
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: bus %s: %v\n", name, url, err)
		return cfg, nil, ExitBus
	}
	return cfg, nc, ExitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
