package logbound

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func notes(t *testing.T, out string) (lines []string, ns []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == NoteMsg {
			ns = append(ns, m)
			continue
		}
		lines = append(lines, sc.Text())
	}
	return lines, ns
}

// Under the rate, every line passes as written, however the writes split it.
func TestUnderTheRateEverythingPasses(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	b := New(&out, Limits{}, c.now)
	in := `{"level":"INFO","msg":"one"}` + "\n" + `{"level":"INFO","msg":"two"}` + "\nthree\n"
	for i := 0; i < len(in); i += 5 {
		if _, err := b.Write([]byte(in[i:min(i+5, len(in))])); err != nil {
			t.Fatal(err)
		}
		c.advance(time.Millisecond)
	}
	if _, err := b.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), in+"partial\n"; got != want {
		t.Errorf("passed %q, want %q", got, want)
	}
	if s := b.Stats(); s.DroppedBytes+s.CutBytes != 0 || s.PassedLines != 4 {
		t.Errorf("stats %+v", s)
	}
}

// A flood as fast as the writer can go: what passes stays within the burst
// and the rate over the time it lasted, the rest is counted, and notes say
// so at most once every NoteEvery and once more at the end.
func TestAFloodIsHeldToTheRate(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	lim := Limits{Rate: 16 << 10, Burst: 256 << 10, MaxLine: 16 << 10}
	b := New(&out, lim, c.now)
	line := []byte(strings.Repeat("x", 99) + "\n")
	const seconds = 60
	var written int64
	for ms := 0; ms < seconds*1000; ms++ {
		for i := 0; i < 100; i++ { // 10 MB/s
			_, _ = b.Write(line)
			written += int64(len(line))
		}
		c.advance(time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	s := b.Stats()
	bound := int64(lim.Burst + lim.Rate*seconds)
	if s.PassedBytes > bound || s.PassedBytes < bound-int64(len(line))*200 {
		t.Errorf("passed %d bytes in %d s, want just under %d (burst %d + %d/s)", s.PassedBytes, seconds, bound, lim.Burst, lim.Rate)
	}
	if s.PassedBytes+s.DroppedBytes != written {
		t.Errorf("passed %d + dropped %d != written %d: bytes unaccounted for", s.PassedBytes, s.DroppedBytes, written)
	}
	lines, ns := notes(t, out.String())
	if int64(len(lines)) != s.PassedLines {
		t.Errorf("%d lines out, stats say %d", len(lines), s.PassedLines)
	}
	if len(ns) < seconds/int(NoteEvery/time.Second) || len(ns) > seconds/int(NoteEvery/time.Second)+1 {
		t.Errorf("%d notes in %d s of flood, want one every %s and a last one", len(ns), seconds, NoteEvery)
	}
	var sum float64
	for _, n := range ns {
		sum += n["dropped_bytes"].(float64)
	}
	if int64(sum) != s.DroppedBytes || int64(ns[len(ns)-1]["total_dropped_bytes"].(float64)) != s.DroppedBytes {
		t.Errorf("the notes count %v dropped bytes (last total %v), the bound %d", sum, ns[len(ns)-1]["total_dropped_bytes"], s.DroppedBytes)
	}
	// Quiet again: the bucket refills and lines pass.
	c.advance(time.Minute)
	out.Reset()
	_, _ = b.Write([]byte("back\n"))
	if !strings.Contains(out.String(), "back\n") {
		t.Errorf("after a quiet minute a line is still held back: %q", out.String())
	}
}

// A line longer than MaxLine is cut there, across writes too, and counted.
func TestLongLinesAreCut(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	b := New(&out, Limits{MaxLine: 100}, c.now)
	_, _ = b.Write([]byte(strings.Repeat("a", 150)))
	_, _ = b.Write([]byte(strings.Repeat("b", 150) + "\nnext\n"))
	_, _ = b.Write([]byte(strings.Repeat("c", 200) + "\n"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	lines, ns := notes(t, out.String())
	want := []string{strings.Repeat("a", 99), "next", strings.Repeat("c", 99)}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", lines, want)
	}
	s := b.Stats()
	if s.CutLines != 2 || s.CutBytes != 51+150+1+101+1 {
		t.Errorf("cut %d lines, %d bytes; want 2 lines, %d bytes", s.CutLines, s.CutBytes, 51+150+1+101+1)
	}
	if len(ns) != 1 || int64(ns[0]["cut_bytes"].(float64)) != s.CutBytes {
		t.Errorf("notes %v", ns)
	}
}

// BenchmarkBound: the bound's cost per line against a plain copy of the
// same lines (the figure is the ratio of the two).
func BenchmarkBound(b *testing.B) {
	line := []byte(`{"time":"2026-12-03T09:00:00Z","level":"INFO","msg":"task done","task":"t-123","status":"ok"}` + "\n")
	b.Run("bound", func(b *testing.B) {
		bd := New(discard{}, Limits{Rate: 1 << 40, Burst: 1 << 40}, nil)
		b.SetBytes(int64(len(line)))
		for i := 0; i < b.N; i++ {
			_, _ = bd.Write(line)
		}
	})
	b.Run("plain", func(b *testing.B) {
		var w discard
		b.SetBytes(int64(len(line)))
		for i := 0; i < b.N; i++ {
			_, _ = w.Write(line)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
