package node

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

func TestAdvertiseWildcardPicksHostAddress(t *testing.T) {
	pick := func() (net.IP, error) { return net.ParseIP("10.1.2.3"), nil }
	for _, bind := range []string{"0.0.0.0:8470", "[::]:8470", ":8470"} {
		got, err := advertiseAddr("--http-addr", bind, "--advertise-http-addr", "", pick)
		if err != nil || got != "10.1.2.3:8470" {
			t.Errorf("bind %s: got %q, %v; want 10.1.2.3:8470", bind, got, err)
		}
	}
	// A concrete bind advertises itself (empty: the bound address).
	if got, err := advertiseAddr("--http-addr", "127.0.0.1:8470", "--advertise-http-addr", "", pick); err != nil || got != "" {
		t.Errorf("loopback bind: got %q, %v; want the bound address", got, err)
	}
	// An explicit advertise address wins; a host alone keeps the bind port.
	for adv, want := range map[string]string{"192.168.1.9": "192.168.1.9:8470", "192.168.1.9:9000": "192.168.1.9:9000",
		"node1.example.com": "node1.example.com:8470", "[fd00::1]": "[fd00::1]:8470", "fd00::1": "[fd00::1]:8470"} {
		if got, err := advertiseAddr("--http-addr", "0.0.0.0:8470", "--advertise-http-addr", adv, pick); err != nil || got != want {
			t.Errorf("advertise %s: got %q, %v; want %s", adv, got, err, want)
		}
	}
}

func TestAdvertiseRefusals(t *testing.T) {
	none := func() (net.IP, error) { return nil, errors.New("this host has no private IPv4 address") }
	_, err := advertiseAddr("--raft-addr", "0.0.0.0:8472", "--advertise-raft-addr", "", none)
	if err == nil || !strings.Contains(err.Error(), "--advertise-raft-addr") || !strings.Contains(err.Error(), "--raft-addr 0.0.0.0:8472") {
		t.Fatalf("wildcard bind without an address to pick: err = %v; want it to name --raft-addr and --advertise-raft-addr", err)
	}
	for _, adv := range []string{"0.0.0.0", "[::]:8470", "10.0.0.1:0", "10.0.0.1:http", "a b"} {
		if _, err := advertiseAddr("--gossip-addr", "0.0.0.0:8471", "--advertise-gossip-addr", adv, none); err == nil || !strings.Contains(err.Error(), "--advertise-gossip-addr") {
			t.Errorf("advertise %q: err = %v; want a refusal naming --advertise-gossip-addr", adv, err)
		}
	}
	// Through New: the flag is named before anything binds.
	cfg := testConfig(t, "n1", 1, nil)
	cfg.AdvertiseHTTPAddr = "0.0.0.0"
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "--advertise-http-addr") {
		t.Fatalf("New with --advertise-http-addr 0.0.0.0: err = %v", err)
	}
	// The secure-by-default rule still covers wildcard binds.
	cfg = testConfig(t, "n1", 1, nil)
	cfg.HTTPAddr = "0.0.0.0:0"
	cfg.AdvertiseHTTPAddr = "127.0.0.2"
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("wildcard --http-addr without TLS: err = %v; want the TLS refusal", err)
	}
}

func TestPickPrivateIPv4(t *testing.T) {
	nets := func(cidrs ...string) []net.Addr {
		var out []net.Addr
		for _, c := range cidrs {
			ip, n, _ := net.ParseCIDR(c)
			out = append(out, &net.IPNet{IP: ip, Mask: n.Mask})
		}
		return out
	}
	ifs := []ifaceAddrs{
		{up: true, loopback: true, addrs: nets("127.0.0.1/8")},
		{up: false, addrs: nets("10.9.9.9/8")},                                // down
		{up: true, addrs: nets("fd00::5/64", "203.0.113.7/24", "fe80::1/64")}, // no private IPv4
		{up: true, addrs: nets("172.16.4.2/12", "192.168.0.2/24")},
		{up: true, addrs: nets("10.0.0.2/8")},
	}
	ip, err := pickPrivateIPv4(ifs)
	if err != nil || ip.String() != "172.16.4.2" {
		t.Fatalf("pick = %v, %v; want 172.16.4.2 (first private IPv4 of an up, non-loopback interface)", ip, err)
	}
	if _, err := pickPrivateIPv4(ifs[:3]); err == nil {
		t.Fatal("no private IPv4: want an error")
	}
}

// TestAdvertiseSingleNode: a node bound to 127.0.0.1 that advertises
// 127.0.0.2 (a host alone: the bound ports) tells that address in its
// member entry, its metadata and its Raft configuration.
func TestAdvertiseSingleNode(t *testing.T) {
	cfg := testConfig(t, "n1", 1, nil)
	cfg.AdvertiseHTTPAddr, cfg.AdvertiseRaftAddr, cfg.AdvertiseGossipAddr = "127.0.0.2", "127.0.0.2", "127.0.0.2"
	n := startNode(t, cfg)
	c := &testCluster{t: t, nodes: []*testNode{n}}
	c.waitReady(20 * time.Second)
	_, hp, _ := net.SplitHostPort(n.HTTPAddr())
	wantHTTP := "127.0.0.2:" + hp
	if n.AdvertiseHTTPAddr() != wantHTTP {
		t.Fatalf("AdvertiseHTTPAddr = %s, want %s", n.AdvertiseHTTPAddr(), wantHTTP)
	}
	ms := n.members.Members()
	if len(ms) != 1 || ms[0].Meta.HTTPAddr != wantHTTP || !strings.HasPrefix(ms[0].Meta.RaftAddr, "127.0.0.2:") ||
		!strings.HasPrefix(ms[0].GossipAddr, "127.0.0.2:") || strings.HasSuffix(ms[0].GossipAddr, ":0") || strings.HasSuffix(ms[0].Meta.RaftAddr, ":0") {
		t.Fatalf("members = %+v; want gossip, http and raft on 127.0.0.2 with the bound ports", ms)
	}
	servers, err := n.store.Configuration()
	if err != nil || len(servers) != 1 || servers[0].Address != ms[0].Meta.RaftAddr {
		t.Fatalf("raft configuration = %+v, %v; want n1 at %s", servers, err, ms[0].Meta.RaftAddr)
	}
}

// TestAdvertiseBehindNAT: n2 binds 127.0.0.1 and advertises 127.0.0.2 on
// other ports, where a TCP forwarder plays the NAT. Its peer sees those
// addresses in n2's metadata and Raft replicates to n2 through them.
func TestAdvertiseBehindNAT(t *testing.T) {
	n1 := startNode(t, testConfig(t, "n1", 1, nil))
	httpNAT, raftNAT := newForwarder(t, "127.0.0.2:0"), newForwarder(t, "127.0.0.2:0")
	cfg := testConfig(t, "n2", 0, []string{n1.GossipAddr()})
	cfg.AdvertiseHTTPAddr, cfg.AdvertiseRaftAddr = httpNAT.addr(), raftNAT.addr()
	cfg.RaftAddr = freeLoopbackPort(t) // the store reports only its advertised address
	raftNAT.to(cfg.RaftAddr)
	n2 := startNode(t, cfg)
	httpNAT.to(n2.HTTPAddr())
	if n2.RaftAddr() != raftNAT.addr() {
		t.Fatalf("n2 raft address %s, want the advertised %s", n2.RaftAddr(), raftNAT.addr())
	}

	testwait.For(t, 20*time.Second, "n1 to see n2's advertised addresses", func() bool {
		for _, m := range n1.members.Members() {
			if m.ID == "n2" && m.Meta.HTTPAddr == httpNAT.addr() && m.Meta.RaftAddr == raftNAT.addr() {
				return true
			}
		}
		return false
	})
	c := &testCluster{t: t, nodes: []*testNode{n1, n2}}
	c.waitReady(30 * time.Second)
	testwait.For(t, 20*time.Second, "n2 in n1's raft configuration at its advertised address", func() bool {
		servers, _ := n1.store.Configuration()
		for _, s := range servers {
			if s.ID == "n2" {
				return s.Address == raftNAT.addr()
			}
		}
		return false
	})
	if raftNAT.conns.Load() == 0 {
		t.Fatal("no Raft connection went through the advertised address")
	}
}

// freeLoopbackPort returns 127.0.0.1:<a port that was free a moment ago>.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// forwarder is a TCP port forwarder on a loopback alias, standing in for a
// NAT: connections to addr() go to the target set with to().
type forwarder struct {
	ln     net.Listener
	target atomic.Pointer[string]
	ready  chan struct{}
	once   sync.Once
	conns  atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   map[net.Conn]bool // both ends of every forwarded connection
	closed bool
}

// track remembers c so close can end it; false once closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return false
	}
	f.open[c] = true
	return true
}

// close stops accepting and ends every forwarded connection (peers keep
// pooled Raft connections open indefinitely), then waits for the copiers.
func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.open {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func newForwarder(t *testing.T, listen string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Skipf("loopback alias %s unavailable: %v", listen, err)
	}
	f := &forwarder{ln: ln, ready: make(chan struct{}), open: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) to(target string) {
	f.target.Store(&target)
	f.once.Do(func() { close(f.ready) })
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			return
		}
		f.conns.Add(1)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.Close()
			select {
			case <-f.ready:
			case <-time.After(10 * time.Second):
				return
			}
			up, err := net.DialTimeout("tcp", *f.target.Load(), 5*time.Second)
			if err != nil || !f.track(up) {
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() { _, _ = io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); close(done) }()
			_, _ = io.Copy(c, up)
			c.Close()
			<-done
		}()
	}
}
