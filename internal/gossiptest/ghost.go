// Package gossiptest joins gossip-only members to a fusebox cluster in
// tests: a memberlist node that advertises the metadata it is given and does
// nothing else — what a node whose Raft port is firewalled looks like to
// gossip, or a holder of the gossip key and nothing else.
package gossiptest

import (
	"io"
	"log"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// ghost gossips fixed metadata and nothing else.
type ghost struct{ meta []byte }

func (g ghost) NodeMeta(int) []byte           { return g.meta }
func (ghost) NotifyMsg([]byte)                {}
func (ghost) GetBroadcasts(int, int) [][]byte { return nil }
func (ghost) LocalState(bool) []byte          { return nil }
func (ghost) MergeRemoteState([]byte, bool)   {}

// Join starts a member named name on loopback that advertises meta (the
// JSON of cluster.Meta), encrypts with keys when given (the first is
// primary), and joins the member at addr. It is shut down in tb's cleanup.
func Join(tb testing.TB, name string, meta []byte, keys [][]byte, addr string) *memberlist.Memberlist {
	tb.Helper()
	mc := memberlist.DefaultLANConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = "127.0.0.1", 0, 0
	mc.ProbeInterval, mc.GossipInterval = 200*time.Millisecond, 20*time.Millisecond
	mc.Logger = log.New(io.Discard, "", 0)
	mc.Delegate = ghost{meta: meta}
	if len(keys) > 0 {
		kr, err := memberlist.NewKeyring(keys, keys[0])
		if err != nil {
			tb.Fatal(err)
		}
		mc.Keyring = kr
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{addr}); err != nil {
		tb.Fatalf("%s could not join %s: %v", name, addr, err)
	}
	return ml
}
