package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/internal/tlsutil"
	"fusebox/raftstore/state"
)

// testCA issues node certificates into a temp dir and loads them into
// reloadable holders, as a node does from its flags.
type testCA struct {
	t   *testing.T
	dir string
	ca  tlsutil.PEMPair
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca, err := tlsutil.CreateCA(tlsutil.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, dir: t.TempDir(), ca: ca}
}

func (c *testCA) holder(name string) *tlsutil.Holder {
	c.t.Helper()
	pair, err := tlsutil.CreateCert(c.ca, tlsutil.CertOptions{CommonName: name, Node: true})
	if err != nil {
		c.t.Fatal(err)
	}
	w := func(n string, b []byte) string {
		p := filepath.Join(c.dir, n)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			c.t.Fatal(err)
		}
		return p
	}
	h, err := tlsutil.New(tlsutil.Files{CertFile: w(name+".pem", pair.Cert), KeyFile: w(name+"-key.pem", pair.Key), CAFile: w("ca.pem", c.ca.Cert)}, nil, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = h.Close() })
	return h
}

func TestTLSClusterReplicates(t *testing.T) {
	ca := newTestCA(t)
	c := newTestCluster(t, func(cfg *Config) { cfg.TLS = ca.holder(cfg.NodeID) })
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	c.leader(20 * time.Second)
	// A write on a follower is forwarded and replicated over TLS.
	e, err := c.follower().PutEndpoint(context.Background(), state.PutEndpointCommand{Name: "ep", URL: "https://example.com"})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e.Index, 10*time.Second)
	for id, reg := range c.regs {
		if n := testutil.ToFloat64(mustCounter(t, reg, "inbound")); n != 0 {
			t.Errorf("%s counted %v refused inbound handshakes among its own peers", id, n)
		}
	}
}

// mustCounter finds fusebox_raft_tls_handshake_failures_total{direction}.
func mustCounter(t *testing.T, reg *prometheus.Registry, dir string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fusebox_raft_tls_handshake_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "direction" && l.GetValue() == dir {
					return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
				}
			}
		}
	}
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return 0 })
}

// TestTLSStreamRefusesPlainRaftAndStalledHandshakes: a stranger speaking
// raft's plain TCP transport is answered with nothing and changes
// nothing; a peer that opens a connection and never handshakes neither
// blocks a real peer's RPC nor stays open past the handshake timeout.
func TestTLSStreamRefusesPlainRaftAndStalledHandshakes(t *testing.T) {
	ca := newTestCA(t)
	c := newTestCluster(t, func(cfg *Config) {
		cfg.TLS = ca.holder(cfg.NodeID)
		cfg.TLSHandshakeTimeout = 500 * time.Millisecond
	})
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	ctx := context.Background()
	if _, err := s.SetConfig(ctx, state.SetConfigCommand{Key: "k", Value: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()

	// A stalled connection: TCP only, no ClientHello.
	stalled, err := net.Dial("tcp", s.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()

	// The stranger: raft's own plain transport, a higher term, one entry.
	stranger, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(stranger.LocalAddr())},
		Term:      before.Term + 100, PrevLogEntry: before.LastIndex, PrevLogTerm: before.Term, LeaderCommitIndex: before.LastIndex + 1,
		Entries: []*raft.Log{{Index: before.LastIndex + 1, Term: before.Term + 100, Type: raft.LogCommand, Data: []byte("injected")}},
	}
	var resp raft.AppendEntriesResponse
	if err := stranger.AppendEntries("n1", raft.ServerAddress(s.RaftAddr()), req, &resp); err == nil {
		t.Fatalf("a plain-TCP AppendEntries was answered: %+v", resp)
	}

	// A real peer gets through while the stalled connection is pending.
	peer := ca.holder("n2")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"direction"})
	layer := newTLSStreamLayer(ln, ln.Addr(), peer, time.Second, failures, c.nodes["n1"].logger)
	good := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 1, Timeout: 2 * time.Second})
	defer func() { good.CloseStreams(); _ = good.Close() }() // Close leaves pooled conns open
	var vote raft.RequestVoteResponse
	start := time.Now()
	err = good.RequestVote("n1", raft.ServerAddress(s.RaftAddr()), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2"), Addr: []byte(layer.Addr().String())}, Term: 0, LastLogIndex: 0, LastLogTerm: 0,
	}, &vote)
	if err != nil {
		t.Fatalf("a peer with a CA certificate was not answered: %v", err)
	}
	// The stalled handshake is still pending (its timeout has not passed):
	// the peer was served beside it, not after it.
	_ = stalled.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := stalled.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled connection closed before the peer's RPC was answered (%v after %v): the peer waited for it", err, time.Since(start))
	}

	// The stalled connection is closed after the handshake timeout.
	_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stalled.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("stalled connection: read %v, want EOF (closed by the node)", err)
	}

	// Raft adopts a higher term from any AppendEntries it decodes, before
	// it looks at the entries: an unchanged term means the stranger's RPC
	// was never read. (The last index may grow meanwhile by the leader's
	// own writes, so it proves nothing.)
	after := s.Stats()
	if after.Term != before.Term || after.State != "Leader" {
		t.Fatalf("the stranger changed raft: term %d→%d, state %s", before.Term, after.Term, after.State)
	}
	// The stalled handshake's failure is counted after its connection is
	// closed: the client may see EOF first.
	testwait.For(t, 5*time.Second, "fusebox_raft_tls_handshake_failures_total{direction=inbound} ≥ 2 (stranger, stalled)", func() bool {
		return testutil.ToFloat64(mustCounter(t, c.regs["n1"], "inbound")) >= 2
	})
}

// RaftBoundAddr is the listener's bound address, which RaftAddr (the
// advertised one) does not show: the node's destination policy refuses
// both. Plain TCP and TLS alike (bound on loopback: tests bind nothing
// else).
func TestRaftBoundAddrBesideAdvertised(t *testing.T) {
	ca := newTestCA(t)
	for _, tls := range []bool{false, true} {
		c := newTestCluster(t, func(cfg *Config) {
			cfg.RaftBindAddr, cfg.AdvertiseAddr = "127.0.0.1:0", "127.0.0.2:0"
			if tls {
				cfg.TLS = ca.holder(cfg.NodeID)
			}
		})
		s := c.add("n1", 1)
		_, port, _ := net.SplitHostPort(s.RaftAddr())
		if s.RaftAddr() != "127.0.0.2:"+port || s.RaftBoundAddr() != "127.0.0.1:"+port {
			t.Errorf("tls=%v: RaftAddr %s, RaftBoundAddr %s; want 127.0.0.2 and 127.0.0.1 on one port", tls, s.RaftAddr(), s.RaftBoundAddr())
		}
	}
}
