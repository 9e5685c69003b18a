package node

import (
	"fmt"

	"fusebox/queue"
	"fusebox/raftstore"
)

// endpointResolver resolves Nexus endpoint names from the replicated
// registry for the queue, at every attempt, so an endpoint's new URL takes
// effect on the next call.
type endpointResolver struct{ store *raftstore.Store }

func (r endpointResolver) ResolveEndpoint(name string) (string, error) {
	e, ok := r.store.Endpoint(name)
	if !ok {
		return "", fmt.Errorf("%w %q", queue.ErrUnknownEndpoint, name)
	}
	return e.URL, nil
}
