package node

import (
	"fmt"

	"fusebox/queue"
	"fusebox/raftstore/state"
)

// endpointResolver resolves Nexus endpoint names from the replicated
// registry for the queue, at every attempt, so an endpoint's new URL takes
// effect on the next call.
type endpointResolver struct{ endpoints endpointReader }

// endpointReader is the endpoint registry of the replicated state (the local
// replica: raftstore/state.State).
type endpointReader interface {
	Endpoint(name string) (state.Endpoint, bool)
}

func (r endpointResolver) ResolveEndpoint(name string) (string, error) {
	e, ok := r.endpoints.Endpoint(name)
	if !ok {
		return "", fmt.Errorf("%w %q", queue.ErrUnknownEndpoint, name)
	}
	return e.URL, nil
}
