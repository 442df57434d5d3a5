package flock

import "github.com/ai-flock/ai-flock/protocol"

// OTLPConfig is flock:otlp: span export, off unless an endpoint is set.
type OTLPConfig struct {
	Endpoint string `json:"endpoint"`
}

// validate: the gateway exports the spans (the flock's one route out), so
// an endpoint needs a gateway.
func (c OTLPConfig) validate(es *errs, gw ModelGateway) OTLP {
	if c.Endpoint == "" {
		return OTLP{}
	}
	if err := protocol.CheckOTLPEndpoint(c.Endpoint); err != nil {
		es.add("flock:otlp.endpoint", "%v", err)
		return OTLP{}
	}
	if !gw.Enabled() {
		es.add("flock:otlp.endpoint", "needs a model gateway (flock:gateway.upstreams): the gateway is the flock's one route out, and it exports the spans")
		return OTLP{}
	}
	return OTLP{Endpoint: c.Endpoint}
}
