package flock

import (
	"math"
	"time"
)

func (l LimitsConfig) validate(es *errs, key string, base Limits) Limits {
	out := base
	if l.CPUs != nil {
		if v := *l.CPUs; v <= 0 || v > 64 || math.IsNaN(v) {
			es.add(key+".cpus", "must be more than 0 and at most 64 cores (got %v)", v)
		} else if !cpuRoundTrips(v) {
			es.add(key+".cpus", "%v cores cannot be declared exactly: the docker provider reads the quota back as %q and would replace the container on every pulumi up; pick a value that reads back unchanged (0.5, 0.25, 1, 1.5, ...)", v, CPUString(v))
		} else {
			out.CPUs = v
		}
	}
	rangeMemoryMiB.check(es, key+".memoryMiB", l.MemoryMiB, &out.MemoryMiB)
	rangePids.check(es, key+".pids", l.Pids, &out.Pids)
	rangeTmpfsMiB.check(es, key+".tmpfsMiB", l.TmpfsMiB, &out.TmpfsMiB)
	rangeConcurrency.check(es, key+".concurrency", l.Concurrency, &out.Concurrency)
	rangeDiskMiB.check(es, key+".diskMiB", l.DiskMiB, &out.DiskMiB)
	rangeTaskTimeout.check(es, key+".taskTimeout", l.TaskTimeout, &out.TaskTimeout)
	if out.TmpfsMiB*2 > out.MemoryMiB && (l.TmpfsMiB != nil || l.MemoryMiB != nil) {
		// tmpfs pages count against the memory limit: /tmp and /run together must fit.
		es.add(key+".tmpfsMiB", "twice the tmpfs size (/tmp and /run) must fit in memoryMiB %d (got %d)", out.MemoryMiB, out.TmpfsMiB)
	}
	return out
}

func intIn(es *errs, key string, v *int, lo, hi int, unit string, dst *int) {
	if v == nil {
		return
	}
	if *v < lo || *v > hi {
		es.add(key, "must be between %d and %d %s (got %d)", lo, hi, unit, *v)
		return
	}
	*dst = *v
}

func durationIn(es *errs, key string, v *string, lo, hi time.Duration, dst *time.Duration) {
	if v == nil {
		return
	}
	d, err := time.ParseDuration(*v)
	if err != nil {
		es.add(key, "must be a Go duration such as \"30s\" or \"5m\" (got %q)", *v)
		return
	}
	if d < lo || d > hi {
		es.add(key, "must be between %s and %s (got %s)", lo, hi, d)
		return
	}
	*dst = d
}
