package pgstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/internal/pgtest"
	"fusebox/raftstore/state"
	"fusebox/taskstore/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Runner(m)) }

// suiteStore adapts Store to storetest.Store.
type suiteStore struct{ *Store }

func (s suiteStore) Submit(ctx context.Context, tasks []state.NewTask, at time.Time) ([]state.SubmitOutcome, error) {
	return s.Store.Submit(ctx, tasks, at)
}

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{URL: pgtest.NewDatabase(t), PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		const shards = 8
		s := openTest(t)
		var mu sync.Mutex
		epochs := make(map[int]uint64)
		for shard := range shards {
			epochs[shard] = 1
			if err := s.Acquire(t.Context(), shard, "n1", 1); err != nil {
				t.Fatal(err)
			}
		}
		return storetest.Harness{
			Store: suiteStore{s}, Shards: shards, As: func(string) storetest.Store { return suiteStore{s} },
			Epoch: func(shard int) uint64 { mu.Lock(); defer mu.Unlock(); return epochs[shard] },
			Take: func(t *testing.T, shard int, node string) uint64 {
				mu.Lock()
				epochs[shard]++
				e := epochs[shard]
				mu.Unlock()
				if err := s.Acquire(t.Context(), shard, node, e); err != nil {
					t.Fatal(err)
				}
				return e
			},
		}
	})
}
