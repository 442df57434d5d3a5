package worker

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ai-flock/ai-flock/agent/logfile"
)

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error (got %q)", s)
	}
	return l, nil
}

// NewLogger returns the agent's JSON logger: every record goes to stdout and
// to the size-bounded log file (LOG_FILE). If the file cannot be opened the
// logger still writes to stdout and says so. close flushes and closes the file.
//
// The last lines are also kept in memory (recent), for the operator's logs
// request: pass it on as Config.Recent.
func NewLogger(c Config, stdout io.Writer) (log *slog.Logger, recent *RecentLog, close func()) {
	level, err := parseLevel(c.LogLevel)
	if err != nil {
		level = slog.LevelInfo
	}
	recent = NewRecentLog()
	var w io.Writer = tee{stdout, recent}
	close = func() {}
	var fileErr error
	if c.LogFile != "" && c.LogFile != "-" && c.LogFile != "off" {
		_ = os.MkdirAll(filepath.Dir(c.LogFile), 0o700)
		f, err := logfile.Open(c.LogFile, c.LogMaxBytes)
		if err != nil {
			fileErr = err
		} else {
			w = tee{stdout, f, recent}
			close = func() { _ = f.Close() }
		}
	}
	log = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("agent", c.ID)
	if fileErr != nil {
		log.Warn("log file unavailable: logging to stdout only", "file", c.LogFile, "err", fileErr)
	}
	return log, recent, close
}

// tee writes to every writer, whatever the others do: a closed stdout must
// not silence the log file, nor the other way round.
type tee []io.Writer

func (t tee) Write(p []byte) (int, error) {
	for _, w := range t {
		_, _ = w.Write(p)
	}
	return len(p), nil
}
