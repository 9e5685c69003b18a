package node

import (
	"context"

	"fusebox/ui"
)

// uiHistory builds the status page's history (calls per breaker key from
// the registry, shard owners from the replicated map, every 2 s for 5 min)
// and runs it until ctx ends, on the node's wait group.
func (n *Node) uiHistory(ctx context.Context) *ui.History {
	h, err := ui.NewHistory(n.reg, n.shardOwners, 0, 0)
	if err != nil { // the defaults are valid: a defect, not a condition
		n.log.Error("status page history not started", "err", err)
		return nil
	}
	n.goLoop(func() { h.Run(ctx) })
	return h
}

// shardOwners counts the shards each node owns in this replica's map.
func (n *Node) shardOwners() map[string]int {
	out := map[string]int{}
	m := n.state.ShardMap()
	if m == nil { // before the first map commits
		return out
	}
	for _, a := range m.Shards {
		if a.Owner != "" {
			out[a.Owner]++
		}
	}
	return out
}
