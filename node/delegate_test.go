package node

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// sickSource is the address the sick node's outbound calls leave from
// (--outbound-source-addr); the destination resets every connection from
// it, as a firewall in front of that node alone would.
const sickSource = "127.0.0.2"

// TestSickEgressDeliversThroughAPeer: n1's own egress to the destination is
// broken (every connection from its source address is reset); n2 and n3
// reach it. Every task is delivered, n1's shards' too: its breaker stays
// open (its own probes still fail), and the calls it refuses go through a
// peer. With fusebox.breaker.callThroughPeer off for the destination, n1's
// shards' tasks wait behind its breaker, as before the feature.
func TestSickEgressDeliversThroughAPeer(t *testing.T) {
	if ln, err := net.Listen("tcp", sickSource+":0"); err != nil {
		t.Skipf("cannot use %s as a source address here: %v", sickSource, err)
	} else {
		_ = ln.Close()
	}
	dest := transporttest.NewDestination(t)
	dest.RefuseFrom(sickSource)
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.NodeID == "n1" {
			cfg.OutboundSourceAddr = sickSource
		}
	})
	sick := c.nodes[0]
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })
	sickShards := map[int]bool{}
	for _, s := range ownedBy(t, sick, "n1") {
		sickShards[s.Shard] = true
	}
	if len(sickShards) == 0 {
		t.Fatal("n1 owns no shard")
	}
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: deliveryNS, Destination: host}
	setConfig(t, c.nodes, dynconfig.KeyBreakerSettings, host, `{"Timeout":"1s","FailureThreshold":2}`)

	sub := newSubmitter(t, c.nodes)
	submit := func(prefix string, n int) (all, onSick []string) {
		t.Helper()
		for i := range n {
			id, err := sub.submit(callbackTask(dest.CallbackURL(), fmt.Sprintf("wf-%s-%d", prefix, i), fmt.Sprintf("%s-%d", prefix, i)))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, id)
		}
		testwait.For(t, 10*time.Second, "every task in n1's replica", func() bool {
			for _, id := range all {
				if _, ok := sick.store.Reader().Task(id); !ok {
					return false
				}
			}
			return true
		})
		for _, id := range all {
			if tk, _ := sick.store.Reader().Task(id); sickShards[tk.Shard] {
				onSick = append(onSick, id)
			}
		}
		return all, onSick
	}
	status := func(id string) string {
		tk, _ := sick.store.Reader().Task(id)
		return tk.Status
	}

	t.Run("through a peer", func(t *testing.T) {
		all, onSick := submit("peer", 60)
		if len(onSick) == 0 {
			t.Fatal("no task on n1's shards")
		}
		testwait.For(t, 30*time.Second, "every task delivered, n1's shards' too", func() bool {
			for _, id := range all {
				if status(id) != state.TaskSucceeded {
					return false
				}
			}
			return true
		})
		calls := successfulCalls(dest)
		for _, id := range all {
			if calls[id] == 0 {
				t.Errorf("task %s succeeded without a successful call", id)
			}
		}
		sent := testutil.ToFloat64(sick.deliver.delegate.sent.WithLabelValues("sent", delegateMade))
		var served float64
		for _, n := range c.nodes[1:] {
			served += testutil.ToFloat64(n.deliver.delegate.served.WithLabelValues("served", delegateMade))
		}
		if sent == 0 || served < sent {
			t.Fatalf("calls through a peer: n1 sent %v, its peers served %v", sent, served)
		}
		if dest.RefusedConns() == 0 {
			t.Fatal("n1 never tried the destination itself")
		}
		if b, ok := sick.pool.Lookup(key); !ok || b.State() == gobreaker.StateClosed {
			t.Fatal("n1's breaker is closed: its egress is broken, its own probes cannot pass")
		}
		t.Logf("%d tasks (%d on n1's shards) delivered; n1 made %v calls through a peer; %d connections from n1 reset",
			len(all), len(onSick), sent, dest.RefusedConns())
	})

	t.Run("off for the destination", func(t *testing.T) {
		setConfig(t, c.nodes, dynconfig.KeyBreakerCallThroughPeer, host, `"off"`)
		before := testutil.ToFloat64(sick.deliver.delegate.sent.WithLabelValues("sent", delegateMade))
		all, onSick := submit("off", 60)
		if len(onSick) == 0 {
			t.Fatal("no task on n1's shards")
		}
		waiting := map[string]bool{}
		for _, id := range onSick {
			waiting[id] = true
		}
		testwait.For(t, 30*time.Second, "the other shards' tasks delivered", func() bool {
			for _, id := range all {
				if !waiting[id] && status(id) != state.TaskSucceeded {
					return false
				}
			}
			return true
		})
		for _, id := range onSick {
			if s := status(id); s != state.TaskPending {
				t.Errorf("task %s on n1's shards is %s; with calls through a peer off it waits for n1's egress", id, s)
			}
		}
		if after := testutil.ToFloat64(sick.deliver.delegate.sent.WithLabelValues("sent", delegateMade)); after != before {
			t.Fatalf("%v calls through a peer with the key off", after-before)
		}

		dest.RefuseFrom("") // n1's egress heals: its own probe passes, its tasks follow
		testwait.For(t, 30*time.Second, "n1's shards' tasks delivered by n1 itself", func() bool {
			for _, id := range onSick {
				if status(id) != state.TaskSucceeded {
					return false
				}
			}
			return true
		})
	})
}

// TestConfigOutboundSourceAddr: --outbound-source-addr takes an IP this
// host has, and names itself when refusing anything else.
func TestConfigOutboundSourceAddr(t *testing.T) {
	base := testConfig(t, "c1", 1, nil)
	for addr, ok := range map[string]bool{
		"": true, "127.0.0.1": true,
		"x": false, "127.0.0.1:80": false, "192.0.2.1": false, // the last: TEST-NET-1, not an address of this host
	} {
		cfg := base
		cfg.OutboundSourceAddr = addr
		err := cfg.Validate()
		switch {
		case ok && err != nil:
			t.Errorf("%q: %v", addr, err)
		case !ok && (err == nil || !strings.HasPrefix(err.Error(), "--outbound-source-addr")):
			t.Errorf("%q: error %v, want one naming --outbound-source-addr", addr, err)
		}
	}
}

// TestWholeEgressBrokenGoesThroughPeers: n1 reaches none of six
// destinations (every connection from its source address reset) while its
// peers reach them all. It soon suspects its own egress, and a suspect
// node's reports start no confirmation round: for the keys it trips on
// after that, no peer's closed hint tells it that it is the one, and a
// peer probe (a call through a peer that reached the destination) does.
// Every task is delivered, its shards' through its peers.
func TestWholeEgressBrokenGoesThroughPeers(t *testing.T) {
	if ln, err := net.Listen("tcp", sickSource+":0"); err != nil {
		t.Skipf("cannot use %s as a source address here: %v", sickSource, err)
	} else {
		_ = ln.Close()
	}
	const nDest = 6
	var dests []*transporttest.Destination
	for range nDest {
		d := transporttest.NewDestination(t)
		d.RefuseFrom(sickSource)
		dests = append(dests, d)
	}
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.NodeID == "n1" {
			cfg.OutboundSourceAddr = sickSource
		}
	})
	sick := c.nodes[0]
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })
	for _, d := range dests {
		host := transport.BreakerDestination(breakerpool.TaskGroupCallback, d.CallbackURL())
		setConfig(t, c.nodes, dynconfig.KeyBreakerSettings, host, `{"Timeout":"1s","FailureThreshold":2}`)
	}
	sub := newSubmitter(t, c.nodes)
	var ids []string
	for i := range 120 {
		d := dests[i%nDest]
		id, err := sub.submit(callbackTask(d.CallbackURL(), fmt.Sprintf("wf-all-%d", i), fmt.Sprintf("all-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	testwait.For(t, 60*time.Second, "every task delivered", func() bool {
		for _, id := range ids {
			if tk, ok := sick.store.Reader().Task(id); !ok || tk.Status != state.TaskSucceeded {
				return false
			}
		}
		return true
	})
	sent := testutil.ToFloat64(sick.deliver.delegate.sent.WithLabelValues("sent", delegateMade))
	refused := 0
	for _, d := range dests {
		refused += d.RefusedConns()
	}
	if sent == 0 || refused == 0 {
		t.Fatalf("n1 made %v calls through a peer, %d of its own connections were reset", sent, refused)
	}
	suspect, _ := sick.hints.Suspect()
	t.Logf("%d tasks to %d destinations delivered; n1 made %v calls through a peer; %d of its connections reset; suspect now: %v",
		len(ids), nDest, sent, refused, suspect)
}
