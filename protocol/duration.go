package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Duration is a time.Duration that reads "30s", "5m" or a number of seconds
// and writes the string form.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == 0 {
		return []byte(`""`), nil
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "1m30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as \"30s\" (got %q)", s)
		}
		*d = Duration(v)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\" or a number of seconds (got %s)", b)
	}
	if f > float64(1<<62)/float64(time.Second) || f < -float64(1<<62)/float64(time.Second) {
		return fmt.Errorf("duration %s s out of range", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}
