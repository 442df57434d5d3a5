package dockerflock

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// The dev target's configuration keys: its own, and the docker provider's
// engine address, which the host steps use too.
const (
	Key     = "flock:docker"
	HostKey = "docker:host"
)

// ConfigShape is what Key holds, for the error when it is not even that.
const ConfigShape = "an object {baseImage, agentContext}"

// Config is flock:docker, the dev target's settings, before validation.
type Config struct {
	BaseImage    string `json:"baseImage"`
	AgentContext string `json:"agentContext"`
}

// Validate turns flock:docker and docker:host into the component's arguments
// (all but the credentials and the rendered bus files), with every problem,
// each naming its key and the rule it breaks, for the stack to report with
// the model's: errors.Join of *flock.Error (flock.Problems lists them).
func (c Config) Validate(m flock.Model, dockerHost string) (Args, error) {
	var errs []error
	host, err := ParseHost(dockerHost)
	if err != nil {
		errs = append(errs, err)
	}
	a := Args{Model: m, Host: host, AgentContext: c.AgentContext, BaseImage: c.BaseImage}
	if a.AgentContext == "" {
		a.AgentContext = "agent"
	}
	// An agent's own Dockerfile is built where the program runs: it must be there.
	errs = append(errs, flock.ImageFileErrors(m.Agents, os.Stat)...)
	return a, errors.Join(errs...)
}

// ParseHost checks a docker:host value. tcp:// engines are refused: the
// shared directories must be prepared on the engine's own filesystem, which
// only a local engine or an SSH login can reach.
func ParseHost(dockerHost string) (Host, error) {
	switch {
	case dockerHost == "", strings.HasPrefix(dockerHost, "unix://"):
		return Host{DockerHost: dockerHost}, nil
	case strings.HasPrefix(dockerHost, "ssh://"):
		u, err := url.Parse(dockerHost)
		if err != nil || u.Hostname() == "" || u.Path != "" {
			return Host{}, &flock.Error{Key: HostKey, Rule: fmt.Sprintf("must be ssh://[user@]host[:port] (got %q)", dockerHost)}
		}
		return Host{DockerHost: dockerHost}, nil
	default:
		return Host{}, &flock.Error{Key: HostKey, Rule: fmt.Sprintf("must be empty, unix://… or ssh://[user@]host[:port]; other engines cannot have the shared directory prepared on their filesystem (got %q)", dockerHost)}
	}
}

// ConfigKeys are the dev target's keys, for the configuration reference.
func ConfigKeys() []flock.ConfigKey {
	return []flock.ConfigKey{
		{Key: Key + ".baseImage", Type: "image reference", Default: "(the Dockerfile's BASE)", Rule: "scratch builds with no registry access", Targets: flock.DockerOnly, Description: "base of the stock images"},
		{Key: Key + ".agentContext", Type: "path", Default: "agent", Rule: "a directory holding agent/Dockerfile and the prebuilt binaries", Targets: flock.DockerOnly, Description: "docker build context of the images"},
		{Key: HostKey, Type: "string", Default: "(the local engine)", Rule: "empty, unix://… or ssh://[user@]host[:port]", Targets: flock.DockerOnly, Description: "the Docker engine; over SSH the host steps run there too"},
	}
}
