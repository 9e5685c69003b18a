package node

import (
	"context"
	"errors"
	"testing"

	"fusebox/queue"
	"fusebox/raftstore/state"
)

// lagReader is a replica that applies the endpoint registration only at
// the read barrier.
type lagReader struct{ applied bool }

func (l *lagReader) Endpoint(name string) (state.Endpoint, bool) {
	if l.applied && name == "ep" {
		return state.Endpoint{Name: "ep", URL: "http://127.0.0.1:9/nexus"}, true
	}
	return state.Endpoint{}, false
}

// A name this replica does not know yet is looked up again after a read
// barrier before the task is failed as unknown: with tasks in PostgreSQL a
// task can reach its owner before the owner's replica has applied the
// endpoint's registration.
func TestResolverCatchesUpBeforeUnknown(t *testing.T) {
	lag := &lagReader{}
	syncs := 0
	r := endpointResolver{endpoints: lag, sync: func(context.Context) error { syncs++; lag.applied = true; return nil }}
	if url, err := r.ResolveEndpoint("ep"); err != nil || url != "http://127.0.0.1:9/nexus" || syncs != 1 {
		t.Fatalf("ResolveEndpoint = %q, %v after %d syncs; want the URL after one", url, err, syncs)
	}
	if _, err := r.ResolveEndpoint("gone"); !errors.Is(err, queue.ErrUnknownEndpoint) {
		t.Fatalf("an unknown name after catching up: %v, want ErrUnknownEndpoint", err)
	}
	failing := endpointResolver{endpoints: &lagReader{}, sync: func(context.Context) error { return errors.New("no leader") }}
	if _, err := failing.ResolveEndpoint("ep"); err == nil || errors.Is(err, queue.ErrUnknownEndpoint) {
		t.Fatalf("a miss whose catch-up failed: %v, want a retryable error, not unknown", err)
	}
}
