package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fusebox/cluster"
	"fusebox/raftstore/state"
)

// A node's data dir belongs to one Raft history, named by the cluster id
// its first leader wrote to the replicated state. The node advertises it
// in its gossip metadata (cluster.Meta.ClusterID), and a leader neither
// adds to its Raft configuration nor gives shards to a member that
// advertises another (raftstore.Member.Foreign). Before, a node restarted
// on the data dir of another cluster, or pointed at this cluster's --join
// by mistake, was added like any member and, with the higher term of its
// own history, was this cluster's leader within a second: from then on
// every replica applied its entries, the others on top of this cluster's
// state and it on top of its own, so the replicas silently disagreed
// (TestForeignNodeIsNotAdded).
//
// The id is kept in a file of the data dir as well, written as soon as the
// state has it: at start the state is not applied yet (raft replays its
// log once it learns the commit index), and the node joins gossip before
// that, so the file is what its first alive message carries.

const clusterIDFile = "cluster-id"

// readClusterID is the cluster id recorded in dir, "" if none is.
func readClusterID(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, clusterIDFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeClusterID records id in dir (a temporary file renamed over the old).
func writeClusterID(dir, id string) error {
	tmp := filepath.Join(dir, clusterIDFile+".tmp")
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, clusterIDFile))
}

// clusterIDBackstop is how often watchClusterID looks without a wake-up:
// to retry a failed write or metadata update.
const clusterIDBackstop = 5 * time.Second

// watchClusterID keeps the data dir's file and the gossip metadata on the
// state's cluster id (advertised: the one the node started with). Members
// of another cluster are logged where they are refused: by gossip
// (cluster/foreign.go) and by the Raft leader's reconcile.
func (n *Node) watchClusterID(ctx context.Context, advertised string) {
	wake, unsub := n.state.Subscribe(state.TableMeta)
	defer unsub()
	t := time.NewTicker(clusterIDBackstop)
	defer t.Stop()
	written := advertised
	for {
		if id := n.state.ClusterID(); id != "" {
			if id != written {
				if err := writeClusterID(n.cfg.DataDir, id); err != nil {
					n.log.Warn("could not record the cluster id in the data dir; trying again", "err", err)
				} else {
					written = id
				}
			}
			if id != advertised {
				if err := n.members.UpdateMeta(func(m *cluster.Meta) { m.ClusterID = id }); err != nil {
					n.log.Warn("could not advertise the cluster id; trying again", "err", err)
				} else {
					advertised = id
					n.log.Info("cluster id", "cluster_id", id)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}
