package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

func boardPut(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("board put", asAgentOnly, env, sio)
	name := b.fs.String("name", "", "the artifact's name (default: FILE's base name)")
	if code, ok := b.parse(args, 3, "board put PLAN TASK FILE [--name N]"); !ok {
		return code
	}
	f, err := os.Open(b.pos[2])
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: %v\n", b.name, err)
		return ExitUsage
	}
	data, err := io.ReadAll(io.LimitReader(f, protocol.ArtifactBytes+1))
	f.Close()
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: %v\n", b.name, err)
		return ExitUsage
	}
	if len(data) > protocol.ArtifactBytes {
		fmt.Fprintf(sio.Err, "%s: %s is over the board's %d-byte limit of one artifact\n", b.name, b.pos[2], protocol.ArtifactBytes)
		return ExitUsage
	}
	if *name == "" {
		*name = filepath.Base(b.pos[2])
	}
	return ask(ctx, b, func(ctx context.Context, bc *board.Client) (*protocol.BoardArtifact, error) {
		return bc.Put(ctx, b.pos[0], b.pos[1], *name, data)
	}, func(w io.Writer, a *protocol.BoardArtifact) {
		fmt.Fprintf(w, "put %s/%s/%s (%d bytes)\n", a.Plan, a.Task, a.Name, a.Size)
	})
}

func boardGet(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("board get", asEither, env, sio)
	out := b.fs.String("o", "", "write it to this file (default: stdout)")
	if code, ok := b.parse(args, 3, "board get PLAN TASK NAME [-o FILE] [--as-agent | --operator]"); !ok {
		return code
	}
	return b.run(ctx, boardWait, func(ctx context.Context, bc *board.Client, _ *nats.Conn) (int, error) {
		data, _, err := bc.Get(ctx, b.pos[0], b.pos[1], b.pos[2])
		if err != nil {
			return 0, err
		}
		if *out == "" {
			_, err = sio.Out.Write(data)
			return ExitOK, err
		}
		if err := os.WriteFile(*out, data, 0o600); err != nil {
			return 0, err
		}
		return ExitOK, nil
	})
}
