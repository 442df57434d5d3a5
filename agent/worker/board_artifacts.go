package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// neededArtifacts fetches the artifacts the tasks t needs left (their
// results name them), as task files needs/<task>/<name> (an agent's
// subtask <agent>/<id> as needs/<agent>.<id>/<name>): the command finds
// them in its directory before it starts. An artifact the store does not
// have (a result naming one its task never put) is skipped and logged; any
// other failure is returned (the task is handed back, to run when the
// board answers).
func (a *Agent) neededArtifacts(cl *board.Client, t *protocol.BoardTask, needs []protocol.BoardTask, log *slog.Logger) (map[string]string, error) {
	files := map[string]string{}
	for _, n := range needs {
		if n.Result == nil {
			continue
		}
		for _, name := range n.Result.Artifacts {
			ctx, cancel := context.WithTimeout(a.runCtx, boardRequestTimeout)
			data, _, err := cl.Get(ctx, t.Plan, n.ID, name)
			cancel()
			var be *protocol.BoardError
			switch {
			case errors.As(err, &be) && be.Code == protocol.BoardErrNotFound:
				log.Warn("board: a needed task's artifact is not in the store: skipped", "need", n.ID, "artifact", name)
				continue
			case err != nil:
				return nil, fmt.Errorf("artifact %s of %s: %w", name, n.ID, err)
			}
			if len(files) >= protocol.MaxTaskFiles-1 { // context.json is one
				return files, nil
			}
			files[protocol.NeedsDir+"/"+protocol.BoardTaskFile(n.ID)+"/"+name] = string(data)
		}
	}
	return files, nil
}

// putArtifacts puts on the board the files the command left in its
// artifacts directory (regular files at its top, at most
// protocol.MaxBoardArtifacts, each within protocol.ArtifactBytes and the
// artifact name rule) and returns their names. Anything else there is an
// error: the task fails, saying which file and why.
func (a *Agent) putArtifacts(cl *board.Client, t *protocol.BoardTask, dir string) ([]string, error) {
	root, err := os.OpenRoot(filepath.Join(dir, protocol.ArtifactsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", protocol.ArtifactsDir, err)
	}
	defer root.Close()
	f, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", protocol.ArtifactsDir, err)
	}
	entries, err := f.ReadDir(protocol.MaxBoardArtifacts + 1)
	f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", protocol.ArtifactsDir, err)
	}
	if len(entries) > protocol.MaxBoardArtifacts {
		return nil, fmt.Errorf("%s: more than %d files (the board takes at most %d artifacts of a task)", protocol.ArtifactsDir, protocol.MaxBoardArtifacts, protocol.MaxBoardArtifacts)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var names []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() { // no directories, no symlinks (os.Root would refuse one leading out anyway)
			return nil, fmt.Errorf("%s/%s: not a regular file", protocol.ArtifactsDir, name)
		}
		if err := protocol.CheckBoardArtifactName(protocol.ArtifactsDir+"/"+name, name); err != nil {
			return nil, err
		}
		data, err := readBounded(root, name, protocol.ArtifactBytes)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", protocol.ArtifactsDir, name, err)
		}
		ctx, cancel := context.WithTimeout(a.runCtx, boardRequestTimeout)
		_, err = cl.Put(ctx, t.Plan, t.ID, name, data)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", protocol.ArtifactsDir, name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// readBounded reads a file of root, refusing one over limit bytes.
func readBounded(root *os.Root, name string, limit int) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("over the board's %d-byte limit of one artifact", limit)
	}
	return data, nil
}
