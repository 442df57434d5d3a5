package flock

// Rendered is what a stack renders for its flock component from the flock's
// keys and model, the same for both targets: the bus nodes' configs (public
// keys only) and the seeds and upstream keys, which the component keeps as
// Pulumi secrets and hands to no container but the one they are for.
type Rendered struct {
	// Seeds are the agents' NATS nkey seeds (agent ID -> seed).
	Seeds map[string]string
	// BusConfigs are the rendered NATS configs of the bus nodes, one per
	// node in node order (Model.Bus.BusNodes); BusTopology is the JetStream
	// topology they share.
	BusConfigs  [][]byte
	BusTopology []byte
	// With a model gateway (Model.Gateway.Enabled): its bus nkey seed and
	// each upstream's key (upstream name -> key).
	GatewaySeed string
	GatewayKeys map[string]string
	// With egress rules: each credential (secret config key without flock:
	// -> value); with brokered rules the egress CA's seed (hex, the
	// gateway's only) and its certificate (PEM, every agent's).
	EgressSecrets map[string]string
	EgressCASeed  string
	EgressCA      string
	// ServicesSeed is the flock services' NATS nkey seed (the bus user
	// protocol.ServicesUser).
	ServicesSeed string
}
