package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"fusebox/api"
	"fusebox/cluster"
	"fusebox/raftstore"
)

// opsAPI is the operator toolkit the API serves (api.Ops): raft
// leadership and membership, snapshots, the gossip keyring.
type opsAPI struct{ n *Node }

var _ api.Ops = opsAPI{}

func (o opsAPI) TransferLeader(ctx context.Context, to string) (raftstore.TransferResult, error) {
	return o.n.store.TransferLeader(ctx, to)
}

func (o opsAPI) RemovePeer(ctx context.Context, id string, force bool) (raftstore.RemovePeerResult, error) {
	return o.n.store.RemovePeer(ctx, id, force)
}

func (o opsAPI) SaveSnapshot(ctx context.Context) ([]byte, error) {
	return o.n.store.SaveSnapshot(ctx, o.n.cfg.Version)
}

func (o opsAPI) RestoreSnapshot(ctx context.Context, file io.Reader, force bool) (raftstore.RestoreResult, error) {
	return o.n.store.RestoreSnapshot(ctx, file, o.n.cfg.Version, force, api.MaxSnapshotBytes)
}

// PeerClient reaches member id's API with token.
func (o opsAPI) PeerClient(id, token string) (*api.Client, bool) {
	for _, m := range o.n.members.Members() {
		if m.ID == id && m.Meta.HTTPAddr != "" {
			if o.n.tls != nil {
				return api.NewTLSClient(m.Meta.HTTPAddr, token, o.n.peerHC), true
			}
			return api.NewClient(m.Meta.HTTPAddr, token, nil), true
		}
	}
	return nil, false
}

// LocalKeyring lists or changes this node's keyring, persisting a change to
// --gossip-key-file.
func (o opsAPI) LocalKeyring(_ context.Context, op, key string) (api.KeyringNode, error) {
	out := api.KeyringNode{Node: o.n.cfg.NodeID}
	var infos []cluster.KeyInfo
	var err error
	if op == "list" {
		infos, err = o.n.members.Keys()
	} else {
		k, derr := cluster.DecodeKey(key)
		if derr != nil {
			return out, api.BadField("key", "%v", derr)
		}
		infos, err = o.n.members.KeyringChange(op, k, o.n.cfg.GossipKeyFile)
		out.Persisted = err == nil && o.n.cfg.GossipKeyFile != ""
	}
	if errors.Is(err, cluster.ErrKeyring) {
		return out, api.Errorf(http.StatusConflict, api.CodeConflict, "%v", err)
	}
	if err != nil {
		return out, err
	}
	for _, ki := range infos {
		out.Keys = append(out.Keys, api.KeyringKey{Fingerprint: ki.Fingerprint, Primary: ki.Primary})
	}
	return out, nil
}

// ClusterKeyring runs op on every live member, this node included, through
// their APIs with this node's own token, after checking that the change is
// safe everywhere: use needs the key installed on every live member,
// remove is refused while any member encrypts with the key.
func (o opsAPI) ClusterKeyring(ctx context.Context, op, key string) (api.KeyringAnswer, error) {
	ans := api.KeyringAnswer{Op: op}
	fp := ""
	if op != "list" {
		k, err := cluster.DecodeKey(key)
		if err != nil {
			return ans, api.BadField("key", "%v", err)
		}
		fp = cluster.Fingerprint(k)
	}
	if op == "use" || op == "remove" {
		before := o.fanOut(ctx, "list", "")
		var missing, primaryOn []string
		for _, nd := range before {
			if nd.Error != "" {
				return ans, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "cannot read the keyring of %s: %s; nothing was changed", nd.Node, nd.Error)
			}
			has, prim := false, false
			for _, k := range nd.Keys {
				if k.Fingerprint == fp {
					has, prim = true, k.Primary
				}
			}
			if !has {
				missing = append(missing, nd.Node)
			}
			if prim {
				primaryOn = append(primaryOn, nd.Node)
			}
		}
		if op == "use" && len(missing) > 0 {
			return ans, api.Errorf(http.StatusConflict, api.CodeConflict, "key %s is not installed on %s; run `fusebox admin keyring install` first (nothing was changed)", fp, strings.Join(missing, ", "))
		}
		if op == "remove" && len(primaryOn) > 0 {
			return ans, api.Errorf(http.StatusConflict, api.CodeConflict, "key %s is the primary key (in use) on %s; `fusebox admin keyring use` another key first (nothing was changed)", fp, strings.Join(primaryOn, ", "))
		}
	}
	ans.Nodes = o.fanOut(ctx, op, key)
	ans.Members = len(ans.Nodes)
	sums := map[string]*api.KeyringSummary{}
	for _, nd := range ans.Nodes {
		if nd.Error != "" {
			ans.Failed++
			continue
		}
		for _, k := range nd.Keys {
			s := sums[k.Fingerprint]
			if s == nil {
				s = &api.KeyringSummary{Fingerprint: k.Fingerprint}
				sums[k.Fingerprint] = s
			}
			s.Nodes++
			if k.Primary {
				s.PrimaryOn++
			}
		}
	}
	for _, s := range sums {
		ans.Keys = append(ans.Keys, *s)
	}
	sort.Slice(ans.Keys, func(i, j int) bool { return ans.Keys[i].Fingerprint < ans.Keys[j].Fingerprint })
	o.n.log.Info("cluster keyring operation", "op", op, "key", fp, "members", ans.Members, "failed", ans.Failed)
	return ans, nil
}

// fanOut runs op on every alive member in parallel (this node directly)
// and returns their answers sorted by node; it returns when every call has.
func (o opsAPI) fanOut(ctx context.Context, op, key string) []api.KeyringNode {
	var (
		mu  sync.Mutex
		out []api.KeyringNode
		wg  sync.WaitGroup
	)
	add := func(nd api.KeyringNode) {
		mu.Lock()
		out = append(out, nd)
		mu.Unlock()
	}
	token := o.n.tokens.Set().Outgoing()
	for _, m := range o.n.members.Members() {
		if m.State != cluster.StateAlive {
			continue
		}
		if m.ID == o.n.cfg.NodeID {
			nd, err := o.LocalKeyring(ctx, op, key)
			if err != nil {
				nd.Error = err.Error()
			}
			add(nd)
			continue
		}
		c, ok := o.PeerClient(m.ID, token)
		if !ok {
			add(api.KeyringNode{Node: m.ID, Error: "no HTTP address in its gossip metadata"})
			continue
		}
		wg.Go(func() {
			nd, err := c.LocalKeyring(ctx, op, key)
			nd.Node = m.ID
			if err != nil {
				nd.Error = fmt.Sprintf("%v", err)
			}
			add(nd)
		})
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}
