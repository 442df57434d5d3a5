package protocol

// The flock's metrics: the services' exporter turns what crosses the bus
// (heartbeats, results, events, usage, the board, the streams' state) into
// Prometheus series named flock_*, and answers SubjectMetrics with them.
// Agents keep no listening port; on the dev stack each bus node relays
// the answer over HTTP on MetricsPort, published on the host's loopback
// only (node n on MetricsPort+n-1).

// SubjectMetrics is the request the services answer with the flock's
// metrics: the Prometheus text format, gzip-compressed (MetricsEncoding),
// or an error text with the header MetricsErrorHeader.
const SubjectMetrics = "flock.metrics"

// MetricsPort is the bus node's HTTP port for /metrics (the relay).
const MetricsPort = 9464

// MetricsEncoding is how the services' answer is encoded.
const MetricsEncoding = "gzip"

// MetricsErrorHeader marks an answer that is an error text, not metrics.
const MetricsErrorHeader = "Flock-Metrics-Error"

// EnvBusMetricsListen is where the bus serves the relay (host:port); unset,
// it serves none (the aws stack, which writes CloudWatch metrics instead).
const EnvBusMetricsListen = "FLOCK_BUS_METRICS_LISTEN"

// On the aws stack the services write the metrics into their log as
// CloudWatch's embedded metric format instead (agent/metrics, EMFWriter),
// once a minute, under the namespace EMFNamespace with the dimension Flock.
const (
	EMFNamespace = "AIFlock"
	EMFEverySecs = 60
	// EnvServicesEMF is the level written (flock or agents); unset: none.
	EnvServicesEMF = "FLOCK_SERVICES_EMF"
	// EnvServicesFlock is the flock's name, the metrics' Flock dimension.
	EnvServicesFlock = "FLOCK_SERVICES_FLOCK"
)

// EMF levels (flock:aws.metrics): none, the flock's figures (per-agent
// series summed, ages the largest), or every agent's own series too.
const (
	EMFOff    = "off"
	EMFFlock  = "flock"
	EMFAgents = "agents"
)
