package egress

import "fmt"

// checkLimits checks a rule's rate, budget and size bounds.
func checkLimits(r *Rule, key string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s%s: "+format, append([]any{key, field}, args...)...))
	}
	if r.RequestsPerMinute < 0 || r.RequestsPerMinute > 1_000_000 {
		bad(".requestsPerMinute", "must be 1 to 1000000, or left out for no bound (got %d)", r.RequestsPerMinute)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{".maxRequestBytes", r.MaxRequestBytes}, {".maxResponseBytes", r.MaxResponseBytes}} {
		if f.v < 0 || f.v > MaxBytes {
			bad(f.name, "must be 1 to %d (1 TiB), or left out for no bound (got %d)", int64(MaxBytes), f.v)
		}
	}
	if b := r.Budget; b != nil {
		if b.Bytes < 1 || b.Bytes > MaxBytes {
			bad(".budget.bytes", "must be 1 to %d (1 TiB) (got %d)", int64(MaxBytes), b.Bytes)
		}
		switch b.Window {
		case "":
			b.Window = WindowDay
		case WindowDay, WindowMonth, WindowNone:
		default:
			bad(".budget.window", "must be %q, %q or %q (got %q)", WindowDay, WindowMonth, WindowNone, b.Window)
		}
	}
	return errs
}
