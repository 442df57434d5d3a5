package protocol

import "strings"

// The flock's own services (the board service today; an exporter and an
// audit writer later) run in one process of their own, flock-services, with
// a bus user of their own: not in the bus, and not as the operator. The
// stacks run it beside the bus (dev: a container on a network of its own,
// joined by every bus node; aws: an ECS service); it listens on nothing.

// ServicesUser is the flock services' bus user.
const ServicesUser = "services"

// ServicesBucket is the key-value bucket the bus tells the services their
// configuration in: the bus writes what the topology it applied says of the
// agents (one ServicesAgentKey each) and of the board (ServicesBoardKey), so
// a new agent, label or limit reaches the board without a redeploy of the
// services. Only the bus writes it; only the services read it.
const (
	ServicesBucket      = "FLOCK_SERVICES"
	ServicesStream      = "KV_" + ServicesBucket
	ServicesBoardKey    = "board"  // BoardConfig without its agents
	servicesAgentPrefix = "agent." // + ID: that agent's BoardAgent
	ServicesBucketBytes = 1 << 20  // the largest flock's entries, with room
)

// ServicesAgentKey is agent id's entry in the services bucket.
func ServicesAgentKey(id string) string { return servicesAgentPrefix + id }

// ServicesAgentOf returns the agent ID of a services bucket key.
func ServicesAgentOf(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, servicesAgentPrefix)
	return id, ok && id != ""
}

// Paths and environment of the services container.
const (
	ServicesConfigDir = "/etc/flock/services"
	// ServicesCredsFile is the services' bus credential (its nkey seed).
	ServicesCredsFile = ServicesConfigDir + "/nats.nk"
	// ServicesRuntimeDir is its writable /run directory.
	ServicesRuntimeDir = "/run/flock-services"
	// ServicesReadyFile is rewritten every few seconds while the services
	// are connected and serving; `flock-services health` checks it is fresh.
	ServicesReadyFile = ServicesRuntimeDir + "/ready"

	EnvServicesNATSURL  = "FLOCK_SERVICES_NATS_URL"  // every bus node, comma-separated
	EnvServicesNkeyFile = "FLOCK_SERVICES_NKEY_FILE" // dev: the seed file (ServicesCredsFile)
	EnvServicesNkey     = "FLOCK_SERVICES_NKEY"      // aws: the seed itself, from Secrets Manager
	EnvServicesReady    = "FLOCK_SERVICES_READY_FILE"
)
