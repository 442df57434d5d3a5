package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// FieldError says which part of a task body was wrong and how.
type FieldError struct {
	Field   string // "body", "v", "id", "kind", "dir", "files[a/b]", ...
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// ErrTooLarge is wrapped by the error DecodeTask returns for an oversized body.
var ErrTooLarge = errors.New("body too large")

type tooLarge struct{ FieldError }

func (e *tooLarge) Unwrap() error { return ErrTooLarge }

var (
	taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	envNamePat    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ValidTaskID reports whether id can name a task directory.
func ValidTaskID(id string) bool { return taskIDPattern.MatchString(id) }

// DecodeTask reads and validates a task body of at most maxBytes bytes
// (maxBytes <= 0: no limit). On error the returned Task holds whatever could
// be read (often the ID), so the error result can name the task; the error is
// a *FieldError naming the field and the rule it breaks.
func DecodeTask(data []byte, maxBytes int) (Task, error) {
	if maxBytes > 0 && len(data) > maxBytes {
		var t Task
		return t, &tooLarge{FieldError{Field: "body", Problem: fmt.Sprintf("task body is %d bytes, over the %d-byte limit", len(data), maxBytes)}}
	}
	var t Task
	if err := json.Unmarshal(data, &t); err != nil {
		// Salvage the ID if the body is JSON but a field has the wrong type.
		var idOnly struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(data, &idOnly) == nil {
			if s, ok := idOnly.ID.(string); ok && ValidTaskID(s) {
				t = Task{ID: s}
			} else {
				t = Task{}
			}
		} else {
			t = Task{}
		}
		return t, &FieldError{Field: "body", Problem: "malformed JSON: " + jsonProblem(err)}
	}
	return t, t.Validate()
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

// Validate checks a decoded task and fills in the defaults (v, kind).
func (t *Task) Validate() error {
	switch {
	case t.V < 0:
		return &FieldError{"v", fmt.Sprintf("must be %d (got %d)", Version, t.V)}
	case t.V == 0:
		t.V = Version
	case t.V > Version:
		return &FieldError{"v", fmt.Sprintf("unsupported version %d: this agent reads version %d", t.V, Version)}
	}
	if t.ID == "" {
		return &FieldError{"id", "is required"}
	}
	if !ValidTaskID(t.ID) {
		return &FieldError{"id", fmt.Sprintf("must match %s: it names the task directory (got %q)", taskIDPattern, clip(t.ID))}
	}
	if len(t.Nonce) > 128 {
		return &FieldError{"nonce", fmt.Sprintf("at most 128 bytes (got %d)", len(t.Nonce))}
	}
	if t.Kind == "" {
		if t.Command == "" {
			return &FieldError{"kind", fmt.Sprintf("is required (one of %s)", strings.Join(Kinds, ", "))}
		}
		t.Kind = KindExec
	}
	switch t.Kind {
	case KindEcho:
	case KindExec:
		if t.Command == "" {
			return &FieldError{"command", "is required for kind exec"}
		}
		if err := checkCommand(t.Command); err != nil {
			return err
		}
	default:
		return &FieldError{"kind", fmt.Sprintf("unknown kind %q (this agent runs: %s)", clip(t.Kind), strings.Join(Kinds, ", "))}
	}
	if len(t.Args) > MaxArgs {
		return &FieldError{"args", fmt.Sprintf("at most %d arguments (got %d)", MaxArgs, len(t.Args))}
	}
	for i, a := range t.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return &FieldError{fmt.Sprintf("args[%d]", i), "must not contain a NUL byte"}
		}
	}
	if len(t.Env) > MaxEnv {
		return &FieldError{"env", fmt.Sprintf("at most %d variables (got %d)", MaxEnv, len(t.Env))}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		switch {
		case !envNamePat.MatchString(k):
			return &FieldError{"env", fmt.Sprintf("variable name %q must match %s", clip(k), envNamePat)}
		case strings.HasPrefix(k, "FLOCK_"):
			return &FieldError{"env", fmt.Sprintf("variable %q: names FLOCK_* are set by the agent", k)}
		case strings.IndexByte(t.Env[k], 0) >= 0:
			return &FieldError{"env", fmt.Sprintf("variable %q must not contain a NUL byte", k)}
		}
	}
	if t.Dir != "" {
		if err := CheckRelPath(t.Dir); err != nil {
			return &FieldError{"dir", err.Error()}
		}
	}
	if len(t.Files) > MaxTaskFiles {
		return &FieldError{"files", fmt.Sprintf("at most %d files (got %d)", MaxTaskFiles, len(t.Files))}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Files)) {
		if err := CheckRelPath(name); err != nil {
			return &FieldError{fmt.Sprintf("files[%s]", clip(name)), err.Error()}
		}
	}
	if t.Timeout < 0 || time.Duration(t.Timeout) > MaxTaskTimeout {
		return &FieldError{"timeout", fmt.Sprintf("must be between 0 (the agent's default) and %s (got %s)", MaxTaskTimeout, time.Duration(t.Timeout))}
	}
	if t.MaxOutputBytes < 0 {
		return &FieldError{"max_output_bytes", fmt.Sprintf("must not be negative (got %d)", t.MaxOutputBytes)}
	}
	return nil
}

// checkCommand accepts an absolute path, a bare name, or a relative path
// without ".." (resolved in the work directory).
func checkCommand(c string) error {
	switch {
	case strings.IndexByte(c, 0) >= 0:
		return &FieldError{"command", "must not contain a NUL byte"}
	case !utf8.ValidString(c):
		return &FieldError{"command", "must be valid UTF-8"}
	case strings.HasPrefix(c, "/"):
		return nil
	}
	for _, el := range strings.Split(c, "/") {
		if el == ".." {
			return &FieldError{"command", fmt.Sprintf("a relative command must not contain \"..\": it would leave the task directory (got %q)", clip(c))}
		}
	}
	return nil
}

// CheckRelPath accepts a path that stays inside the directory it is relative
// to: not absolute, no ".." element, no NUL, not empty.
func CheckRelPath(p string) error {
	switch {
	case p == "":
		return errors.New("must not be empty")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("must not contain a NUL byte")
	case !utf8.ValidString(p):
		return errors.New("must be valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("must be relative to the task directory (got %q)", clip(p))
	case len(p) > 1024:
		return fmt.Errorf("at most 1024 bytes (got %d)", len(p))
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("must not contain \"..\": paths cannot leave the task directory (got %q)", clip(p))
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}
