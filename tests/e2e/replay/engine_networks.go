// The engine's networks.

package replay

import (
	"context"
	"net/url"
)

// CreateNetwork creates a network and returns its ID.
func (e *Engine) CreateNetwork(ctx context.Context, req map[string]any) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	err := e.do(ctx, "POST", "/networks/create", req, &out)
	return out.ID, err
}

// ConnectNetwork attaches a container to a network.
func (e *Engine) ConnectNetwork(ctx context.Context, network, container string, endpoint map[string]any) error {
	return e.do(ctx, "POST", "/networks/"+url.PathEscape(network)+"/connect", map[string]any{"Container": container, "EndpointConfig": endpoint}, nil)
}

// DisconnectNetwork detaches a container from a network.
func (e *Engine) DisconnectNetwork(ctx context.Context, network, container string) error {
	return e.do(ctx, "POST", "/networks/"+url.PathEscape(network)+"/disconnect", map[string]any{"Container": container, "Force": true}, nil)
}

// RemoveNetwork deletes a network.
func (e *Engine) RemoveNetwork(ctx context.Context, id string) error {
	return e.do(ctx, "DELETE", "/networks/"+url.PathEscape(id), nil, nil)
}

// InspectNetwork returns a network's inspect document.
func (e *Engine) InspectNetwork(ctx context.Context, id string) (map[string]any, error) {
	return e.inspect(ctx, "/networks/"+url.PathEscape(id))
}

// ListNetworks lists networks carrying label (k=v).
func (e *Engine) ListNetworks(ctx context.Context, label string) ([]string, error) {
	return e.labelled(ctx, "/networks?filters=", label)
}
