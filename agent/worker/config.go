// Package worker is the agent runtime: it connects to the bus with the
// agent's own credentials, takes tasks from its own consumer and the shared
// pool, runs each in /shared/agents/<id>/tasks/<task-id>/, writes result
// files, publishes the result and acks; it heartbeats, announces lifecycle
// events, stores inbox messages and broadcasts for the agent's work to read,
// and drains on SIGTERM.
package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Config is everything the agent reads from its environment.
type Config struct {
	ID             string        // AGENT_ID (required)
	URL            string        // NATS_URL
	SharedDir      string        // SHARED_DIR
	NkeyFile       string        // NATS_NKEY_FILE: the agent's nkey seed
	NkeySeed       string        // NATS_NKEY_SEED: the seed itself (Fargate delivers it through `secrets`); wins over the file
	Heartbeat      time.Duration // HEARTBEAT_INTERVAL
	TaskTimeout    time.Duration // TASK_TIMEOUT: default timeout of a task
	Concurrency    int           // CONCURRENCY: tasks run at once
	MaxOutputBytes int64         // MAX_OUTPUT_BYTES: cap of each of stdout and stderr
	MaxTaskBytes   int           // MAX_TASK_BYTES: largest task body accepted
	LogFile        string        // LOG_FILE ("-" or "off": stdout only)
	LogMaxBytes    int64         // LOG_MAX_BYTES
	// Recent keeps the last log lines for the operator's logs request
	// (NewLogger makes it); nil: the agent answers with none.
	Recent         *RecentLog
	LogLevel       string        // LOG_LEVEL: debug, info, warn, error
	EnvAllow       []string      // ENV_ALLOW: variables passed on to task processes ("NAME" or "PREFIX*")
	Grace          time.Duration // GRACE_PERIOD: how long SIGTERM waits for in-flight tasks
	StatusFile     string        // STATUS_FILE: touched while connected; read by `health`
	TaskKeep       int           // TASK_KEEP: task directories kept (oldest removed)
	InboxKeep      int           // INBOX_KEEP: inbox files kept (oldest removed)
	InboxRate      int           // INBOX_RATE: messages per second stored from one sender (burst 5×)
	InboxBytesRate int64         // INBOX_BYTES_RATE: bytes per second stored from one sender (burst 8×)
	KeyCheck       time.Duration // KEY_CHECK_INTERVAL: how often the key file is checked for a new key
	Program        []string      // AGENT_PROGRAM: the agent program's argv, as a JSON array (none: no program)
	NoBoard        bool          // BOARD=off: the agent does not work the board's run tasks (default on)
	BoardPoll      time.Duration // BOARD_POLL: how often an idle agent asks the board unasked (jittered ±20%)
	Version        string        // reported in heartbeats
}

// Defaults.
const (
	DefaultURL            = "nats://127.0.0.1:4222" // protocol.ClientPort
	DefaultSharedDir      = protocol.ContainerSharedDir
	DefaultNkeyFile       = protocol.ContainerCredsFile
	DefaultHeartbeat      = 30 * time.Second
	DefaultTaskTimeout    = 5 * time.Minute
	DefaultConcurrency    = 2
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxTaskBytes   = 256 << 10
	DefaultLogMaxBytes    = 10 << 20
	DefaultEnvAllow       = "PATH,LANG,LC_ALL,TZ"
	// DefaultGrace fits inside Docker's default 10 s stop timeout.
	DefaultGrace      = 8 * time.Second
	DefaultStatusFile = "/run/flock-agent.status"
	DefaultTaskKeep   = 500
	DefaultInboxKeep  = 1000
	// DefaultInboxRate and DefaultInboxBytesRate bound what one sender can
	// make an agent store: a flooding peer is refused (with a receipt
	// error), the others are not slowed.
	DefaultInboxRate      = 20
	DefaultInboxBytesRate = 1 << 20
	// DefaultKeyCheck is how soon a rotated key file is noticed.
	DefaultKeyCheck = 2 * time.Second
	// StatusEvery is how often a connected agent confirms it (PING/PONG
	// with the bus) and touches its status file.
	StatusEvery = 5 * time.Second
	// DefaultHealthMaxAge is how stale the status file may be for `health`.
	DefaultHealthMaxAge = 4 * StatusEvery
	// DefaultBoardPoll is how often an idle agent asks the board for a run
	// task when no ready signal (board.ready) woke it: the signal is a
	// plain message, lost to an agent that was reconnecting.
	DefaultBoardPoll = 5 * time.Second
)

// FromEnv reads the configuration; every problem names its variable.
func FromEnv(getenv func(string) string) (Config, error) {
	var errs []error
	bad := func(name, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, a...)))
	}
	str := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	dur := func(name string, def, lo, hi time.Duration) time.Duration {
		return inRange(getenv(name), def, lo, hi, time.ParseDuration, "a duration such as 30s", func(format string, a ...any) { bad(name, format, a...) })
	}
	num := func(name string, def, lo, hi int64) int64 {
		parse := func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }
		return inRange(getenv(name), def, lo, hi, parse, "an integer", func(format string, a ...any) { bad(name, format, a...) })
	}
	c := Config{
		ID:             str(protocol.EnvAgentID, ""),
		URL:            str(protocol.EnvNATSURL, DefaultURL),
		SharedDir:      str(protocol.EnvSharedDir, DefaultSharedDir),
		NkeyFile:       str(protocol.EnvNkeyFile, DefaultNkeyFile),
		NkeySeed:       str(protocol.EnvNkeySeed, ""),
		Heartbeat:      dur(protocol.EnvHeartbeat, DefaultHeartbeat, 10*time.Millisecond, time.Hour),
		TaskTimeout:    dur(protocol.EnvTaskTimeout, DefaultTaskTimeout, time.Second, protocol.MaxTaskTimeout),
		Concurrency:    int(num(protocol.EnvConcurrency, DefaultConcurrency, 1, 1024)),
		MaxOutputBytes: num("MAX_OUTPUT_BYTES", DefaultMaxOutputBytes, 1, 1<<30),
		MaxTaskBytes:   int(num("MAX_TASK_BYTES", DefaultMaxTaskBytes, 1<<10, 64<<20)),
		LogMaxBytes:    num("LOG_MAX_BYTES", DefaultLogMaxBytes, 16<<10, 1<<40),
		LogLevel:       str("LOG_LEVEL", "info"),
		EnvAllow:       splitList(str("ENV_ALLOW", DefaultEnvAllow)),
		Grace:          dur("GRACE_PERIOD", DefaultGrace, 0, time.Hour),
		StatusFile:     str(protocol.EnvStatusFile, DefaultStatusFile),
		TaskKeep:       int(num("TASK_KEEP", DefaultTaskKeep, 1, 1<<20)),
		InboxKeep:      int(num("INBOX_KEEP", DefaultInboxKeep, 1, 1<<20)),
		InboxRate:      int(num("INBOX_RATE", DefaultInboxRate, 1, 1<<20)),
		InboxBytesRate: num("INBOX_BYTES_RATE", DefaultInboxBytesRate, 1<<10, 1<<40),
		KeyCheck:       dur("KEY_CHECK_INTERVAL", DefaultKeyCheck, 10*time.Millisecond, time.Hour),
		BoardPoll:      dur("BOARD_POLL", DefaultBoardPoll, 100*time.Millisecond, time.Hour),
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("BOARD"))); v {
	case "", "on":
	case "off":
		c.NoBoard = true
	default:
		bad("BOARD", "want on or off: whether the agent runs the board's run tasks when it has a free slot (got %q)", getenv("BOARD"))
	}
	if getenv("ENV_ALLOW") != "" && strings.TrimSpace(getenv("ENV_ALLOW")) == "-" {
		c.EnvAllow = nil // "-": pass nothing on
	}
	c.LogFile = str("LOG_FILE", filepath.Join(c.SharedDir, "logs", c.ID+".log"))
	if v := getenv(protocol.EnvProgram); v != "" {
		if err := json.Unmarshal([]byte(v), &c.Program); err != nil || len(c.Program) == 0 {
			bad(protocol.EnvProgram, `want a JSON array of the program and its arguments, such as ["/shared/common/bin/my-agent", "--verbose"] (got %q)`, v)
			c.Program = nil
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// inRange is v parsed, def if v is empty, and def with a problem told to
// bad if v does not parse or is outside [lo, hi].
func inRange[T int64 | time.Duration](v string, def, lo, hi T, parse func(string) (T, error), want string, bad func(format string, a ...any)) T {
	if v == "" {
		return def
	}
	n, err := parse(v)
	if err != nil {
		bad("want %s (got %q)", want, v)
		return def
	}
	if n < lo || n > hi {
		bad("must be between %v and %v (got %v)", lo, hi, n)
		return def
	}
	return n
}

// Validate checks what FromEnv cannot default and fills zero values.
func (c *Config) Validate() error {
	var errs []error
	switch {
	case c.ID == "":
		errs = append(errs, errors.New("AGENT_ID: is required"))
	case !protocol.ValidAgentID(c.ID):
		errs = append(errs, fmt.Errorf("AGENT_ID: %w", &protocol.AgentIDError{ID: c.ID}))
	}
	if !filepath.IsAbs(c.SharedDir) {
		errs = append(errs, fmt.Errorf("SHARED_DIR: must be an absolute path (got %q)", c.SharedDir))
	}
	for _, n := range c.EnvAllow {
		if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`).MatchString(n) || strings.HasPrefix(n, "FLOCK_") {
			errs = append(errs, fmt.Errorf("ENV_ALLOW: %q is not a variable name or NAME_PREFIX* (FLOCK_* are the agent's)", n))
		}
	}
	// With its seed in the environment (Fargate) the agent writes the seed
	// beside its status file for its task processes: that must be
	// task-local scratch (/run), never the shared directory, which outlives
	// the task (EFS on aws) and is read by the operator's tools.
	if c.NkeySeed != "" && c.StatusFile != "" && c.StatusFile != "-" && filepath.IsAbs(c.SharedDir) {
		if rel, err := filepath.Rel(c.SharedDir, c.StatusFile); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			errs = append(errs, fmt.Errorf("%s: must not be under %s (%s) when %s is set: the agent writes its key beside it, and the shared directory outlives the task (got %q)", protocol.EnvStatusFile, protocol.EnvSharedDir, c.SharedDir, protocol.EnvNkeySeed, c.StatusFile))
		}
	}
	if len(c.Program) > 0 && !filepath.IsAbs(c.Program[0]) {
		errs = append(errs, fmt.Errorf("%s: the program must be an absolute path (got %q)", protocol.EnvProgram, c.Program[0]))
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL: %w", err))
	}
	if c.URL == "" {
		c.URL = DefaultURL
	}
	positiveOr(&c.Heartbeat, DefaultHeartbeat)
	positiveOr(&c.TaskTimeout, DefaultTaskTimeout)
	positiveOr(&c.Concurrency, DefaultConcurrency)
	positiveOr(&c.MaxOutputBytes, DefaultMaxOutputBytes)
	positiveOr(&c.LogMaxBytes, DefaultLogMaxBytes)
	positiveOr(&c.MaxTaskBytes, DefaultMaxTaskBytes)
	positiveOr(&c.TaskKeep, DefaultTaskKeep)
	positiveOr(&c.InboxRate, DefaultInboxRate)
	positiveOr(&c.InboxBytesRate, DefaultInboxBytesRate)
	positiveOr(&c.InboxKeep, DefaultInboxKeep)
	positiveOr(&c.BoardPoll, DefaultBoardPoll)
	return errors.Join(errs...)
}

// positiveOr sets *p to v unless *p is positive (a zero value takes the default).
func positiveOr[T ~int | ~int64 | ~float64](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}

// AgentDir is the agent's own directory: <shared>/agents/<id>.
func (c Config) AgentDir() string { return filepath.Join(c.SharedDir, "agents", c.ID) }

func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		out = append(out, f)
	}
	return out
}
