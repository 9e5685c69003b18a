package state

import (
	"errors"
	"slices"
	"testing"

	"fusebox/shardmap"
)

func mustNewMap(t *testing.T, n int) *shardmap.Map {
	t.Helper()
	m, err := shardmap.New(n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func commit(prev uint64, m *shardmap.Map) CommitShardMapCommand {
	return CommitShardMapCommand{CommandMeta: meta0, PrevVersion: prev, Map: m}
}

// The shard map is committed only with the cluster's shard count and only as
// a compare-and-set on the previous version; a deposed leader's stale
// proposal is refused and changes nothing.
func TestCommitShardMapCompareAndSet(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	m1, _, _ := shardmap.Rebalance(mustNewMap(t, 8), []string{"a", "b"}, nil)
	wantCode(t, applyCmd(t, f, 1, MsgCommitShardMap, commit(0, m1), ""), CodeConflict, "map") // no shard count yet
	mustOK(t, applyCmd(t, f, 2, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 8}, ""))
	wrongN, _, _ := shardmap.Rebalance(mustNewMap(t, 4), []string{"a"}, nil)
	wantCode(t, applyCmd(t, f, 3, MsgCommitShardMap, commit(0, wrongN), ""), CodeInvalidArgument, "map")
	wantCode(t, applyCmd(t, f, 4, MsgCommitShardMap, commit(0, &shardmap.Map{Version: 1, NumShards: 8}), ""), CodeInvalidArgument, "map")
	wantCode(t, applyCmd(t, f, 5, MsgCommitShardMap, commit(0, nil), ""), CodeInvalidArgument, "map")

	wake, cancel := st.Subscribe(TableMeta)
	defer cancel()
	mustOK(t, applyCmd(t, f, 6, MsgCommitShardMap, commit(0, m1), ""))
	select {
	case <-wake:
	default:
		t.Fatal("commit did not wake TableMeta subscribers")
	}
	if got := st.ShardMap(); !got.Equal(m1) {
		t.Fatalf("committed map = %+v", got)
	}

	// Two leaders both built on version 1: the first wins, the second is stale.
	m2a, _, _ := shardmap.Rebalance(m1, []string{"a", "b", "c"}, nil)
	m2b, _, _ := shardmap.Rebalance(m1, []string{"a"}, nil)
	mustOK(t, applyCmd(t, f, 7, MsgCommitShardMap, commit(1, m2a), ""))
	wantCode(t, applyCmd(t, f, 8, MsgCommitShardMap, commit(1, m2b), ""), CodeConflict, "prev_version")
	same := *m2a
	wantCode(t, applyCmd(t, f, 9, MsgCommitShardMap, commit(2, &same), ""), CodeConflict, "version")
	if got := st.ShardMap(); !got.Equal(m2a) {
		t.Fatalf("stale proposal changed the map: %+v", got)
	}

	// Epochs never go back, and an owner change needs a new epoch.
	back := *m2a
	back.Version = 3
	back.Shards = slices.Clone(m2a.Shards)
	back.Shards[0].Epoch = 0
	wantCode(t, applyCmd(t, f, 10, MsgCommitShardMap, commit(2, &back), ""), CodeInvalidArgument, "map")
	steal := *m2a
	steal.Version = 3
	steal.Shards = slices.Clone(m2a.Shards)
	steal.Shards[0].Owner = "zz"
	wantCode(t, applyCmd(t, f, 11, MsgCommitShardMap, commit(2, &steal), ""), CodeInvalidArgument, "map")
}

func TestShardPinReleaseAndEpochCheck(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	wantCode(t, applyCmd(t, f, 1, MsgSetShardPin, SetShardPinCommand{CommandMeta: meta0, Shard: 1, Node: "b"}, ""), CodeConflict, "shard")
	mustOK(t, applyCmd(t, f, 2, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 4}, ""))
	m1, _, _ := shardmap.Rebalance(mustNewMap(t, 4), []string{"a", "b"}, nil)
	mustOK(t, applyCmd(t, f, 3, MsgCommitShardMap, commit(0, m1), ""))

	a0 := m1.Shards[0]
	if err := st.CheckShardEpoch(0, a0.Owner, a0.Epoch); err != nil {
		t.Fatalf("current owner refused: %v", err)
	}
	err := st.CheckShardEpoch(0, a0.Owner, a0.Epoch-1)
	var wo *shardmap.WrongOwnerError
	if !errors.As(err, &wo) || wo.Owner != a0.Owner || wo.Epoch != a0.Epoch || wo.Shard != 0 {
		t.Fatalf("stale epoch: %v", err)
	}

	mustOK(t, applyCmd(t, f, 4, MsgSetShardPin, SetShardPinCommand{CommandMeta: meta0, Shard: 2, Node: "b"}, ""))
	if got := st.ShardMap(); got.Version != 2 || got.Shards[2].Pinned != "b" || got.Shards[2].Owner != m1.Shards[2].Owner {
		t.Fatalf("after pin: %+v", got.Shards[2])
	}
	wantCode(t, applyCmd(t, f, 5, MsgSetShardPin, SetShardPinCommand{CommandMeta: meta0, Shard: 9, Node: "b"}, ""), CodeNotFound, "")

	stale := a0.Epoch + 7
	r := applyCmd(t, f, 6, MsgReleaseShard, ReleaseShardCommand{CommandMeta: meta0, Shard: 0, Epoch: &stale}, "")
	wantCode(t, r, CodeConflict, "epoch")
	mustOK(t, applyCmd(t, f, 7, MsgReleaseShard, ReleaseShardCommand{CommandMeta: meta0, Shard: 0, Epoch: &a0.Epoch}, ""))
	got := st.ShardMap()
	if got.Version != 3 || got.Shards[0].Owner != "" || got.Shards[0].Epoch != a0.Epoch+1 {
		t.Fatalf("after release: %+v", got.Shards[0])
	}
	if err := st.CheckShardEpoch(0, a0.Owner, a0.Epoch); !errors.Is(err, shardmap.ErrWrongOwner) {
		t.Fatalf("released shard still accepts its old owner: %v", err)
	}
	// Releasing an unowned shard is a no-op.
	mustOK(t, applyCmd(t, f, 8, MsgReleaseShard, ReleaseShardCommand{CommandMeta: meta0, Shard: 0}, ""))
	if st.ShardMap().Version != 3 {
		t.Fatal("no-op release bumped the version")
	}
}

func TestDrainingNodes(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	set := func(i uint64, node string, on bool, reason string) *ApplyResult {
		return applyCmd(t, f, i, MsgSetDrainingNode, SetDrainingNodeCommand{CommandMeta: meta0, Node: node, Draining: on, Reason: reason}, "")
	}
	mustOK(t, set(1, "c", true, DrainOperator))
	mustOK(t, set(2, "a", true, DrainShutdown))
	wantCode(t, set(3, "b", true, "because"), CodeInvalidArgument, "reason")
	wantCode(t, set(4, "", true, DrainOperator), CodeInvalidArgument, "node")
	d := st.DrainingNodes()
	if len(d) != 2 || d[0].Node != "a" || d[1].Node != "c" || d[0].Reason != DrainShutdown || d[1].Index != 1 || !d[1].Since.Equal(t0) {
		t.Fatalf("draining = %+v", d)
	}
	mustOK(t, set(5, "a", true, DrainOperator)) // reason replaced
	mustOK(t, set(6, "c", false, ""))
	mustOK(t, set(7, "zz", false, "")) // clearing an absent node is a no-op
	d = st.DrainingNodes()
	if len(d) != 1 || d[0].Node != "a" || d[0].Reason != DrainOperator || d[0].Index != 5 {
		t.Fatalf("draining = %+v", d)
	}
}
