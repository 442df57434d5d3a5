// Package logfile is a size-bounded log file. The agent's log is a single
// file bind-mounted into its container (/shared/logs/<id>.log) from a small
// filesystem of its own, so it cannot be rotated by renaming: when the next write would pass the limit, the file
// is truncated in place and restarted with the newest quarter of its lines.
package logfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// File is an io.Writer appending to a file of at most Max bytes.
type File struct {
	mu   sync.Mutex
	f    *os.File
	max  int64
	size int64
}

// Open opens (or creates, 0600) path for appending, bounded to max bytes (at least 4 KiB).
func Open(path string, max int64) (*File, error) {
	max = maxOf(max, 4<<10)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &File{f: f, max: max, size: st.Size()}
	if l.size > max {
		l.mu.Lock()
		l.shrink()
		l.mu.Unlock()
	}
	return l, nil
}

// Write appends p, shrinking the file first if p would not fit.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size+int64(len(p)) > l.max {
		l.shrink()
	}
	n, err := l.f.Write(p)
	if err != nil {
		// The file's filesystem is full (the log lives on a small one of its
		// own) or the file was grown behind this writer's back: make room
		// and try once more.
		l.shrink()
		n, err = l.f.Write(p)
	}
	l.size += int64(n)
	return n, err
}

// Size is the file's current size as this writer knows it.
func (l *File) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Close closes the file.
func (l *File) Close() error { return l.f.Close() }

// shrink keeps the newest quarter of the file, starting at a line boundary.
func (l *File) shrink() {
	keep := l.max / 4
	var tail []byte
	if st, err := l.f.Stat(); err == nil && st.Size() > 0 {
		off := maxOf(st.Size()-keep, 0)
		buf := make([]byte, st.Size()-off)
		if n, err := l.f.ReadAt(buf, off); err == nil || err == io.EOF {
			tail = buf[:n]
			if off > 0 {
				if i := bytes.IndexByte(tail, '\n'); i >= 0 {
					tail = tail[i+1:]
				} else {
					tail = nil
				}
			}
		}
	}
	if err := l.f.Truncate(0); err != nil {
		return
	}
	marker := fmt.Sprintf(`{"time":%q,"level":"INFO","msg":"log file reached its limit: truncated in place, newest lines kept","limit_bytes":%d,"kept_bytes":%d}`+"\n",
		time.Now().UTC().Format(time.RFC3339Nano), l.max, len(tail))
	n1, _ := l.f.Write([]byte(marker))
	n2, _ := l.f.Write(tail)
	l.size = int64(n1 + n2)
}

func maxOf(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
