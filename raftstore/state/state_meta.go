package state

// MaxShardCount bounds the shard count.
const MaxShardCount = 1 << 16

func (w *writer) meta(name string) *metaRow {
	if m, ok := w.get(string(TableMeta), name).(*metaRow); ok {
		return m
	}
	return nil
}

func applySetShardCount(w *writer, payload []byte) (any, *Error) {
	var c SetShardCountCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	if c.Count < 1 || c.Count > MaxShardCount {
		return nil, invalidArg("count", "must be between 1 and %d, got %d", MaxShardCount, c.Count)
	}
	if old := w.meta(metaShardCount); old != nil {
		if old.ShardCount != c.Count {
			return nil, conflict("count", "shard count is already %d and cannot change after the cluster is created (asked for %d)", old.ShardCount, c.Count)
		}
		return old.ShardCount, nil
	}
	if err := w.insert(string(TableMeta), &metaRow{Name: metaShardCount, ShardCount: c.Count, Index: w.index}); err != nil {
		return nil, err
	}
	return c.Count, nil
}

// applyRetired refuses a command type that is kept in the table only so that
// its number is never reused.
func applyRetired(_ *writer, _ []byte) (any, *Error) {
	return nil, invalidArg("command", "this command type is retired (the opaque shard map was replaced by commit_shard_map)")
}

func applySetClusterID(w *writer, payload []byte) (any, *Error) {
	var c SetClusterIDCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	if err := CheckName("cluster_id", c.ClusterID, true); err != nil {
		return nil, err
	}
	if old := w.meta(metaClusterID); old != nil {
		if old.ClusterID != c.ClusterID {
			return nil, conflict("cluster_id", "cluster id is already %q", old.ClusterID)
		}
		return old.ClusterID, nil
	}
	if err := w.insert(string(TableMeta), &metaRow{Name: metaClusterID, ClusterID: c.ClusterID, Index: w.index}); err != nil {
		return nil, err
	}
	return c.ClusterID, nil
}
