package bus

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ai-flock/ai-flock/protocol"
)

// Materialize writes the config and topology carried in the environment
// (protocol.EncodeEnv) to
// dir (created 0700, files 0600, replaced by rename) and returns their paths.
// ok is false when the environment carries neither (the Docker target).
func Materialize(dir string, getenv func(string) string) (configFile, topologyFile string, ok bool, err error) {
	conf, okc, err := protocol.DecodeEnv(protocol.EnvBusConfig, getenv)
	if err != nil {
		return "", "", true, err
	}
	topo, okt, err := protocol.DecodeEnv(protocol.EnvBusTopology, getenv)
	if err != nil {
		return "", "", true, err
	}
	if !okc && !okt {
		return "", "", false, nil
	}
	if okc != okt {
		return "", "", true, fmt.Errorf("the environment carries only one of %s and %s", protocol.EnvPartsVar(protocol.EnvBusConfig), protocol.EnvPartsVar(protocol.EnvBusTopology))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", true, err
	}
	configFile, topologyFile = filepath.Join(dir, "nats.conf"), filepath.Join(dir, "topology.json")
	for _, f := range []struct {
		path string
		data []byte
	}{{configFile, conf}, {topologyFile, topo}} {
		tmp := f.path + ".new"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return "", "", true, err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return "", "", true, err
		}
	}
	return configFile, topologyFile, true, nil
}
