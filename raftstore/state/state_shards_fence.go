package state

import (
	"fusebox/shardmap"
)

// FenceShardMap rewrites the shard map of st (a parsed snapshot that nobody
// serves, ParseSnapshot) so that its version and each shard's epoch are above both the snapshot's and the
// current map's, and returns the new version. A snapshot without a map (or
// shard count) taken from a cluster that had none yet keeps the current
// cluster's, fenced the same way: nodes ignore a map whose version is not
// above the one they hold, so the restored state must never go back to "no
// map". The current cluster id (when set) replaces the snapshot's.
func (st *State) FenceShardMap(cur *shardmap.Map, clusterID string) (uint64, error) {
	txn := st.db.Load().Txn(true)
	defer txn.Abort()
	get := func(name string) (*metaRow, error) {
		raw, err := txn.First(string(TableMeta), "id", name)
		if err != nil || raw == nil {
			return nil, err
		}
		row := *raw.(*metaRow)
		return &row, nil
	}
	if clusterID != "" {
		// The cluster id names this Raft history, not the data: a
		// snapshot of another cluster restored here keeps this cluster's,
		// so the nodes of that other cluster, their Raft logs another
		// history, are still told apart (node/clusterid.go).
		if err := txn.Insert(string(TableMeta), &metaRow{Name: metaClusterID, ClusterID: clusterID}); err != nil {
			return 0, err
		}
	}
	row, err := get(metaShards)
	if err != nil {
		return 0, err
	}
	var base *shardmap.Map
	switch {
	case row != nil && row.Shards != nil:
		base = row.Shards
	case cur != nil:
		base = cur
		row = &metaRow{Name: metaShards}
		if sc, err := get(metaShardCount); err != nil {
			return 0, err
		} else if sc == nil {
			if err := txn.Insert(string(TableMeta), &metaRow{Name: metaShardCount, ShardCount: cur.NumShards}); err != nil {
				return 0, err
			}
		}
	default:
		txn.Commit()
		return 0, nil
	}
	m := &shardmap.Map{Version: base.Version + 1, NumShards: base.NumShards, Shards: append([]shardmap.Assignment(nil), base.Shards...)}
	if cur != nil && cur.Version >= m.Version {
		m.Version = cur.Version + 1
	}
	for i := range m.Shards {
		m.Shards[i].Epoch++
		if cur != nil && i < len(cur.Shards) && cur.Shards[i].Epoch >= m.Shards[i].Epoch {
			m.Shards[i].Epoch = cur.Shards[i].Epoch + 1
		}
	}
	if err := m.Validate(); err != nil {
		return 0, &Error{Code: CodeInvalidArgument, Field: "payload", Message: "snapshot shard map: " + err.Error()}
	}
	row.Shards = m
	if err := txn.Insert(string(TableMeta), row); err != nil {
		return 0, err
	}
	txn.Commit()
	return m.Version, nil
}
