package state

import (
	"testing"

	"fusebox/shardmap"
)

// A snapshot taken before the cluster had a shard map keeps the current
// one, moved forward, with the shard count and cluster id: nodes ignore a
// map whose version is not above theirs, so the state never goes back to
// "no map".
func TestFenceShardMapCarriesTheCurrentMapForward(t *testing.T) {
	st, err := NewState(StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur := &shardmap.Map{Version: 7, NumShards: 2, Shards: []shardmap.Assignment{{Shard: 0, Owner: "n1", Epoch: 4}, {Shard: 1, Owner: "n2", Epoch: 9}}}
	v, err := st.FenceShardMap(cur, "cluster-a")
	if err != nil {
		t.Fatal(err)
	}
	m := st.ShardMap()
	if v != 8 || m == nil || m.Version != 8 || m.Shards[0].Epoch != 5 || m.Shards[1].Epoch != 10 || m.Shards[1].Owner != "n2" {
		t.Fatalf("version %d, map %+v", v, m)
	}
	if st.ShardCount() != 2 || st.ClusterID() != "cluster-a" {
		t.Fatalf("shard count %d, cluster id %q", st.ShardCount(), st.ClusterID())
	}
	// Nothing anywhere: nothing to fence.
	empty, _ := NewState(StateOptions{})
	if v, err := empty.FenceShardMap(nil, ""); err != nil || v != 0 || empty.ShardMap() != nil {
		t.Fatalf("empty: %d %v", v, err)
	}
}

// A snapshot of another cluster keeps this cluster's id once restored: the
// id names the Raft history, and that cluster's nodes, whose logs are
// another history, must still be told apart from this one's
// (raftstore.Member.Foreign).
func TestFenceShardMapKeepsTheCurrentClusterID(t *testing.T) {
	st, err := NewState(StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	txn := st.db.Load().Txn(true)
	if err := txn.Insert(string(TableMeta), &metaRow{Name: metaClusterID, ClusterID: "cluster-x"}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	if st.ClusterID() != "cluster-x" {
		t.Fatalf("the snapshot's cluster id %q", st.ClusterID())
	}
	cur := &shardmap.Map{Version: 1, NumShards: 1, Shards: []shardmap.Assignment{{Shard: 0, Owner: "n1", Epoch: 1}}}
	if _, err := st.FenceShardMap(cur, "cluster-a"); err != nil {
		t.Fatal(err)
	}
	if got := st.ClusterID(); got != "cluster-a" {
		t.Fatalf("cluster id after the fence %q, want this cluster's cluster-a", got)
	}
}
