package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ai-flock/ai-flock/protocol"
)

// loadConfig parses the server config. A JSON config (what busconfig renders)
// is first re-encoded without Go's HTML escaping: encoding/json writes ">" as
// "\u003e", an escape the NATS config parser refuses.
func loadConfig(path string) (*server.Options, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return server.ProcessConfigFile(path) // NATS config syntax
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(buf.String()); err != nil {
		// Warnings alone (no errors) do not stop the server, as with ProcessConfigFile.
		var ce interface{ Errors() []error }
		if !errors.As(err, &ce) || len(ce.Errors()) > 0 {
			return nil, err
		}
	}
	opts.ConfigFile = path
	return opts, nil
}

func readTopology(path string) (protocol.Topology, error) {
	var t protocol.Topology
	b, err := os.ReadFile(path)
	if err != nil {
		return t, fmt.Errorf("bus: topology: %w", err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("bus: topology %s: %w", path, err)
	}
	if len(t.Streams) == 0 {
		return t, fmt.Errorf("bus: topology %s lists no streams", path)
	}
	return t, nil
}
