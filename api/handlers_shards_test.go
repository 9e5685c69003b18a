package api

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// fakeShards is a ShardAdmin over a fixed map that records calls.
type fakeShards struct {
	m        *shardmap.Map
	draining []state.DrainingNode
	stats    bool
	calls    []string
}

func (f *fakeShards) ShardMap() *shardmap.Map             { return f.m }
func (f *fakeShards) DrainingNodes() []state.DrainingNode { return f.draining }
func (f *fakeShards) ShardStats(int) (int, uint64, bool)  { return 7, 42, f.stats }

func (f *fakeShards) Move(_ context.Context, shard int, node, _ string) (shardmap.Assignment, error) {
	f.calls = append(f.calls, "move "+node)
	if node != "n2" {
		return shardmap.Assignment{}, &state.Error{Code: state.CodeInvalidArgument, Field: "node", Message: "node \"" + node + "\" is not a live member of the cluster"}
	}
	return shardmap.Assignment{Shard: shard, Owner: node, Epoch: 9, Pinned: node}, nil
}

func (f *fakeShards) Unpin(_ context.Context, shard int, _ string) (shardmap.Assignment, error) {
	f.calls = append(f.calls, "unpin")
	return f.m.Shards[shard], nil
}

func (f *fakeShards) CloseShard(_ context.Context, shard int, epoch *uint64, _ string) (shardmap.Assignment, error) {
	a := f.m.Shards[shard]
	if epoch != nil && *epoch != a.Epoch {
		return shardmap.Assignment{}, &shardmap.WrongOwnerError{Shard: shard, Owner: a.Owner, Epoch: a.Epoch}
	}
	f.calls = append(f.calls, "close")
	a.Epoch += 2
	return a, nil
}

func (f *fakeShards) SetDraining(_ context.Context, node string, on bool, _ string) (uint64, error) {
	if on {
		f.draining = []state.DrainingNode{{Node: node, Reason: state.DrainOperator}}
	} else {
		f.draining = nil
	}
	return 1, nil
}

func TestShardRoutes(t *testing.T) {
	m, _ := shardmap.New(4)
	m, _, _ = shardmap.Rebalance(m, []string{"n1", "n2"}, nil)
	f := &fakeShards{}
	_, c := newTestServer(t, Config{}, Deps{Shards: f})
	ctx := context.Background()
	var e *Error
	if _, err := c.Shards(ctx); !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable {
		t.Fatalf("list before any map: %v; want 503", err)
	}
	f.m = m

	l, err := c.Shards(ctx)
	if err != nil || l.NumShards != 4 || len(l.Shards) != 4 || l.Version != m.Version || l.Shards[1].Owner != m.Shards[1].Owner {
		t.Fatalf("list: %+v, %v", l, err)
	}
	d, err := c.Shard(ctx, 2)
	if err != nil || d.Tasks != TasksNotTracked || d.Backlog != nil || d.Owner != m.Shards[2].Owner {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	f.stats = true
	if d, err = c.Shard(ctx, 2); err != nil || d.Tasks != TasksTracked || *d.Backlog != 7 || *d.AckLevel != 42 {
		t.Fatalf("describe with stats: %+v, %v", d, err)
	}
	if _, err := c.Shard(ctx, 4); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Fatalf("describe shard 4 of 4: %v; want 404", err)
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/shards/x", nil, nil, nil); !errors.As(err, &e) || e.Status != 400 || e.Field != "shard" {
		t.Fatalf("shard x: %v; want 400 on shard", err)
	}

	if s, err := c.MoveShard(ctx, 1, "n2"); err != nil || s.Owner != "n2" || s.Pinned != "n2" {
		t.Fatalf("move: %+v, %v", s, err)
	}
	if _, err := c.MoveShard(ctx, 1, "ghost"); !errors.As(err, &e) || e.Status != 400 || e.Field != "node" {
		t.Fatalf("move to ghost: %v; want 400 naming the node", err)
	}
	if _, err := c.MoveShard(ctx, 1, ""); !errors.As(err, &e) || e.Status != 400 || e.Field != "node" {
		t.Fatalf("move without node: %v", err)
	}

	// A stale epoch comes back as a typed WrongOwnerError.
	a := m.Shards[3]
	stale := a.Epoch + 5
	_, err = c.CloseShard(ctx, 3, &stale)
	wo, ok := AsWrongOwner(err)
	if !ok || wo.Shard != 3 || wo.Owner != a.Owner || wo.Epoch != a.Epoch || !errors.Is(wo, shardmap.ErrWrongOwner) {
		t.Fatalf("stale close: %v (%+v)", err, wo)
	}
	if errors.As(err, &e) && e.Status != http.StatusConflict {
		t.Fatalf("wrong_owner status %d", e.Status)
	}
	if s, err := c.CloseShard(ctx, 3, nil); err != nil || s.Epoch != a.Epoch+2 {
		t.Fatalf("close: %+v, %v", s, err)
	}
	if _, ok := AsWrongOwner(errors.New("other")); ok {
		t.Fatal("AsWrongOwner accepted a plain error")
	}

	ns, err := c.DrainNode(ctx, "n1")
	if err != nil || !ns.Draining || ns.DrainReason != state.DrainOperator || len(ns.Shards) != len(m.OwnedBy("n1")) || (len(ns.Shards) > 0 && !ns.Shards[0].OwnerDraining) {
		t.Fatalf("drain: %+v, %v", ns, err)
	}
	if ns, err = c.UndrainNode(ctx, "n1"); err != nil || ns.Draining {
		t.Fatalf("undrain: %+v, %v", ns, err)
	}
	if ns, err = c.NodeShards(ctx, "n2"); err != nil || ns.Node != "n2" || len(ns.Shards) != len(m.OwnedBy("n2")) {
		t.Fatalf("node shards: %+v, %v", ns, err)
	}
	// An id the cluster does not know is a 404 naming node, not an empty
	// node (a typo read as a node without shards).
	_, err = c.NodeShards(ctx, "zz")
	if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Field != "node" {
		t.Fatalf("shards of an unknown node: %v; want 404 naming node", err)
	}
}
