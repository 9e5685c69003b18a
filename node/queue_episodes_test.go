package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
)

// An open episode whose breaker left the pool (evicted while open) never
// sees its close: noteOpen forgets such episodes once there are many, and
// keeps those whose breaker is still open.
func TestOpenEpisodesPruned(t *testing.T) {
	pool, err := breakerpool.New(breakerpool.Config{IdleTTL: -1}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	var f queueForwarder
	f.pool.Store(pool)
	open := func(k breakerpool.Key) {
		f.noteOpen(breakerpool.Transition{Key: k, From: gobreaker.StateClosed, To: gobreaker.StateOpen, Source: breakerpool.SourceLocal, At: time.Now()})
	}
	still := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: "still-open"}
	pool.Get(still).OpenFor(time.Hour, breakerpool.SourceOperator)
	open(still)
	for i := range minEpisodePrune - 1 {
		open(breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: fmt.Sprint("gone-", i)})
	}
	if got := len(f.episodes); got != minEpisodePrune {
		t.Fatalf("%d episodes before the prune, want %d", got, minEpisodePrune)
	}
	open(breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: "new"})
	if _, ok := f.episodes[still]; !ok || len(f.episodes) != 2 {
		t.Fatalf("%d episodes after the prune (the open one kept: %v), want it and the new one", len(f.episodes), ok)
	}
}
