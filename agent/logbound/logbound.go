// Package logbound bounds what a stream of log lines puts through to its
// destination: at most Rate bytes a second on average with bursts of up to
// Burst, no line longer than MaxLine. What it holds back is counted, and
// said in a note line of its own (JSON, like the runtime's slog lines)
// while it drops and when the stream ends.
//
// Why: on aws an agent's task output goes to CloudWatch Logs, which bills
// every byte ingested and has no bound of its own (awslogs in non-blocking
// mode drops what its buffer cannot hold, uncounted). The agent's init
// process (agent/pid1) copies the runtime's output through a Bound, so a
// program flooding its log costs at most Rate.
package logbound

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Limits are a bound. Zero values take the defaults.
type Limits struct {
	Rate    int // bytes a second, on average
	Burst   int // bytes at once, above the average
	MaxLine int // bytes of one line, its newline included; the rest is cut
}

// The defaults: 16 KiB/s (about 1.4 GB a day, the most one agent's log
// can cost) with 256 KiB bursts; lines as long as Docker's (16 KiB:
// awslogs splits longer ones into events anyway).
const (
	DefaultRate    = 16 << 10
	DefaultBurst   = 256 << 10
	DefaultMaxLine = 16 << 10
)

func (l Limits) withDefaults() Limits {
	if l.Rate <= 0 {
		l.Rate = DefaultRate
	}
	if l.Burst <= 0 {
		l.Burst = DefaultBurst
	}
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
	if l.Burst < l.MaxLine {
		l.Burst = l.MaxLine // else a full line could never pass
	}
	return l
}

// NoteEvery is how often a note says what was dropped, while dropping.
const NoteEvery = 10 * time.Second

// Stats are what a Bound passed and held back.
type Stats struct {
	PassedBytes, PassedLines   int64
	DroppedBytes, DroppedLines int64 // whole lines over the rate
	CutBytes, CutLines         int64 // the ends of lines over MaxLine
}

// Bound is a bounded line copier to one destination.
type Bound struct {
	dst io.Writer
	lim Limits
	now func() time.Time

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	line     []byte // the line being read
	cutting  bool   // the rest of the current line is cut
	stats    Stats
	noted    Stats // stats at the last note
	lastNote time.Time
}

// New returns a Bound writing to dst. now is the clock (nil: time.Now).
func New(dst io.Writer, lim Limits, now func() time.Time) *Bound {
	if now == nil {
		now = time.Now
	}
	lim = lim.withDefaults()
	t := now()
	return &Bound{dst: dst, lim: lim, now: now, tokens: float64(lim.Burst), last: t, lastNote: t}
}

// Limits are the bound's limits, defaults filled in.
func (b *Bound) Limits() Limits { return b.lim }

// Write takes any part of the stream: whole lines pass or are dropped as
// the rate allows; a partial line waits for its end (or MaxLine).
func (b *Bound) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i+1]
		}
		p = p[len(chunk):]
		if b.cutting {
			b.stats.CutBytes += int64(len(chunk))
			if i >= 0 {
				b.cutting = false
			}
			continue
		}
		room := b.lim.MaxLine - 1 - len(b.line) // room for the line's text, less its newline
		text := chunk
		if i >= 0 {
			text = chunk[:len(chunk)-1]
		}
		if len(text) > room {
			b.line = append(b.line, text[:room]...)
			b.stats.CutBytes += int64(len(text) - room)
			b.stats.CutLines++
			b.cutting = i < 0 // the cut part's line goes on past this write
			if i >= 0 {
				b.stats.CutBytes++ // its newline
			}
			if err := b.emit(); err != nil {
				return n, err
			}
			continue
		}
		b.line = append(b.line, text...)
		if i >= 0 {
			if err := b.emit(); err != nil {
				return n, err
			}
		}
	}
	return n, b.maybeNote(false)
}

// emit passes or drops b.line (a newline added) as the rate allows.
func (b *Bound) emit() error {
	line := append(b.line, '\n')
	b.line = b.line[:0]
	t := b.now()
	b.tokens = min(float64(b.lim.Burst), b.tokens+t.Sub(b.last).Seconds()*float64(b.lim.Rate))
	b.last = t
	if float64(len(line)) > b.tokens {
		b.stats.DroppedBytes += int64(len(line))
		b.stats.DroppedLines++
		return nil
	}
	b.tokens -= float64(len(line))
	b.stats.PassedBytes += int64(len(line))
	b.stats.PassedLines++
	_, err := b.dst.Write(line)
	return err
}

// maybeNote writes a note when something was held back since the last one
// and NoteEvery has passed (or at once, when final).
func (b *Bound) maybeNote(final bool) error {
	held := b.stats.DroppedBytes+b.stats.CutBytes > b.noted.DroppedBytes+b.noted.CutBytes
	if !held || !final && b.now().Sub(b.lastNote) < NoteEvery {
		return nil
	}
	since := Stats{
		DroppedBytes: b.stats.DroppedBytes - b.noted.DroppedBytes, DroppedLines: b.stats.DroppedLines - b.noted.DroppedLines,
		CutBytes: b.stats.CutBytes - b.noted.CutBytes, CutLines: b.stats.CutLines - b.noted.CutLines,
	}
	note, _ := json.Marshal(map[string]any{
		"time": b.now().UTC().Format(time.RFC3339Nano), "level": "WARN", "msg": NoteMsg,
		"dropped_bytes": since.DroppedBytes, "dropped_lines": since.DroppedLines,
		"cut_bytes": since.CutBytes, "cut_lines": since.CutLines,
		"total_dropped_bytes":   b.stats.DroppedBytes + b.stats.CutBytes,
		"rate_bytes_per_second": b.lim.Rate, "burst_bytes": b.lim.Burst, "max_line_bytes": b.lim.MaxLine,
	})
	b.noted, b.lastNote = b.stats, b.now()
	_, err := b.dst.Write(append(note, '\n'))
	return err
}

// NoteMsg is the msg of a note.
const NoteMsg = "log output over its bound: held back"

// Close passes a last partial line (as the rate allows) and writes a last
// note if anything was held back since the one before.
func (b *Bound) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.line) > 0 {
		if err := b.emit(); err != nil {
			return err
		}
	}
	return b.maybeNote(true)
}

// Tick writes a note if one is due (a stream gone quiet after a flood
// still says what it dropped).
func (b *Bound) Tick() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maybeNote(false)
}

// Stats are the counts so far.
func (b *Bound) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}
