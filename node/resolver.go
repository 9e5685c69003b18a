package node

import (
	"context"
	"fmt"
	"time"

	"fusebox/queue"
	"fusebox/raftstore/state"
)

// endpointResolver resolves Nexus endpoint names from the replicated
// registry for the queue, at every attempt, so an endpoint's new URL takes
// effect on the next call. A name the local replica does not know is
// looked up again after a read barrier (sync, when set) before it is
// called unknown: with tasks in PostgreSQL, a task submitted through a node
// that had applied the endpoint's registration reaches its owner at once,
// maybe before the owner's replica applies it, and the task failed for good
// ("unknown nexus endpoint", no attempt).
type endpointResolver struct {
	endpoints endpointReader
	sync      func(context.Context) error
}

// resolveSyncTimeout bounds the read barrier of a miss.
const resolveSyncTimeout = 5 * time.Second

// endpointReader is the endpoint registry of the replicated state (the local
// replica: raftstore/state.State).
type endpointReader interface {
	Endpoint(name string) (state.Endpoint, bool)
}

func (r endpointResolver) ResolveEndpoint(name string) (string, error) {
	e, ok := r.endpoints.Endpoint(name)
	if !ok && r.sync != nil {
		ctx, cancel := context.WithTimeout(context.Background(), resolveSyncTimeout)
		err := r.sync(ctx)
		cancel()
		if err != nil {
			return "", fmt.Errorf("endpoint %q not in this replica, and catching up failed: %w", name, err)
		}
		e, ok = r.endpoints.Endpoint(name)
	}
	if !ok {
		return "", fmt.Errorf("%w %q", queue.ErrUnknownEndpoint, name)
	}
	return e.URL, nil
}
