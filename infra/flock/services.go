package flock

import "net/netip"

// FlockServices are the flock's own services (the board service): one
// process with a bus user of its own, beside the bus (dev: a container on
// a network of its own, which every bus node joins; aws: an ECS service).
// Every flock has them.
type FlockServices struct {
	// Slot is the pool slot they take (the third from the pool's end; the
	// last two are the gateway's, whether the flock has one or not): their
	// UID is uidBase + Slot, and on the docker target that slot's subnet is
	// their own network to the bus.
	Slot   int
	UID    int
	Net    netip.Prefix
	Limits Limits
}

// ServicesConfig is flock:services.
type ServicesConfig struct {
	Limits LimitsConfig `json:"limits"`
}

// DefaultServicesLimits bound the services' container or task.
var DefaultServicesLimits = Limits{CPUs: 0.5, MemoryMiB: 128, Pids: 128, TmpfsMiB: 16, TaskTimeout: DefaultBus.Limits.TaskTimeout, Concurrency: 1}

// reservedSlots are the pool's last slots, the flock's own networks: the
// gateway's two and the services'. Agents take the slots before them.
const reservedSlots = 3

func (c ServicesConfig) validate(es *errs, net Network, uidBase int) FlockServices {
	var out FlockServices
	out.Limits = c.Limits.validate(es, "flock:services.limits", DefaultServicesLimits)
	if c.Limits.DiskMiB != nil {
		es.add("flock:services.limits.diskMiB", "is an agent's limit: the services keep nothing on disk")
	}
	capacity := net.Capacity()
	out.Slot = capacity - reservedSlots
	out.UID = uidBase + out.Slot
	if capacity > reservedSlots {
		out.Net, _ = net.subnetFor(out.Slot)
	}
	return out
}
