package services

// The ready file: rewritten while the services serve, read by their health
// check.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// CheckReady reports whether the ready file is fresher than maxAge.
func CheckReady(file string, maxAge time.Duration) error {
	fi, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("not serving: %w", err)
	}
	if age := time.Since(fi.ModTime()); age > maxAge {
		return fmt.Errorf("not serving: ready file is %s old (at most %s)", age.Round(time.Second), maxAge)
	}
	return nil
}

func writeReady(file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	now := time.Now()
	if err := os.Chtimes(file, now, now); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(file, []byte("ok\n"), 0o600)
}
