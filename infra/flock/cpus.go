package flock

import (
	"math"
	"math/big"
	"strings"
)

// CPUString spells a CPU quota exactly as the docker provider reads it back
// from the engine (its NanoCPUs rendered as a decimal: "1.0" for one core,
// "0.5", "1.25", and "10." for ten). The provider's `cpus` forces a
// replacement, so a container declared with any other spelling ("1") is
// replaced on every `pulumi up`.
func CPUString(cores float64) string {
	nano := cpuNanos(cores)
	if nano == 0 {
		return "0"
	}
	r := new(big.Rat).SetFrac64(nano, 1e9)
	s := r.FloatString(9)
	if strings.Count(s, "0") == 9 { // the provider's test for a "round" value
		return r.FloatString(1)
	}
	return strings.TrimRight(s, "0")
}

// cpuRoundTrips reports whether CPUString(cores) reads back as cores. The
// provider rounds some values it considers round (0.05 reads back as "0.1").
func cpuRoundTrips(cores float64) bool {
	r, ok := new(big.Rat).SetString(CPUString(cores))
	return ok && r.Cmp(new(big.Rat).SetFrac64(cpuNanos(cores), 1e9)) == 0
}

func cpuNanos(cores float64) int64 { return int64(math.Round(cores * 1e9)) }
