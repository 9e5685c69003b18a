package transport_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"fusebox/transport"
)

// staticMembers is a fixed member address list.
type staticMembers []string

func (m staticMembers) MemberAddrs() []string { return m }

// hostRules allows exactly the listed scheme://host strings.
type hostRules map[string]bool

func (r hostRules) Allows(scheme, host string) bool { return r[scheme+"://"+host] }

// memberServer is a real HTTP server standing for a member's API; it
// counts the requests that reach it.
func memberServer(t *testing.T) (addr string, port string, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	addr = strings.TrimPrefix(srv.URL, "http://")
	_, port, _ = net.SplitHostPort(addr)
	return addr, port, hits
}

func TestPolicyRefusesMembersAtSubmit(t *testing.T) {
	addr, port, _ := memberServer(t)
	p := &transport.Policy{Members: staticMembers{addr}, DefaultAllow: true}
	ctx := context.Background()
	for _, u := range []string{
		"http://" + addr + "/v1/breakers/force",
		"http://localhost:" + port + "/v1/breakers/force", // a name that resolves to loopback
		"http://LOCALHOST:" + port + "/x",
		"http://0.0.0.0:" + port + "/x", // connects to this host
	} {
		var de *transport.DestinationError
		if err := p.Check(ctx, "ns", u); !errors.As(err, &de) {
			t.Errorf("Check(%s) = %v, want a DestinationError", u, err)
		}
	}
	if err := p.Check(ctx, "ns", "http://127.0.0.1:1/x"); err != nil {
		t.Errorf("another port is refused: %v", err)
	}
	// A member bound to a wildcard address protects its port on every
	// local address.
	wild := &transport.Policy{Members: staticMembers{"0.0.0.0:" + port, "[::]:7"}, DefaultAllow: true}
	for _, u := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/", "http://127.0.0.2:" + port + "/", "http://[::1]:7/"} {
		if err := wild.Check(ctx, "ns", u); err == nil {
			t.Errorf("wildcard member: Check(%s) allowed", u)
		}
	}
	if err := wild.Check(ctx, "ns", "http://192.0.2.10:"+port+"/"); err != nil {
		t.Errorf("a remote address on a wildcard member's port is refused: %v", err)
	}
}

func TestPolicyAllowlist(t *testing.T) {
	lists := map[string]hostRules{
		"open":   {"https://hooks.example.com": true, "http://127.0.0.1:9000": true},
		"locked": {},
	}
	p := &transport.Policy{Allowlist: func(ns string) (transport.AddressMatcher, bool) {
		r, ok := lists[ns]
		return r, ok
	}}
	for _, c := range []struct {
		ns, url string
		ok      bool
	}{
		{"open", "https://hooks.example.com/cb?sig=1", true},
		{"open", "https://HOOKS.example.com/cb", true},
		{"open", "https://other.example.com/cb", false},
		{"open", "http://127.0.0.1:9000/cb", true},
		{"locked", "https://hooks.example.com/cb", false},
		{"unset", "https://hooks.example.com/cb", false}, // no list, DefaultAllow false: Temporal's default
	} {
		err := p.Allowed(c.ns, c.url)
		if (err == nil) != c.ok {
			t.Errorf("Allowed(%s, %s) = %v, want ok=%v", c.ns, c.url, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "sig=") {
			t.Errorf("error repeats the query: %v", err)
		}
	}
	dev := &transport.Policy{DefaultAllow: true, Allowlist: p.Allowlist}
	if err := dev.Allowed("unset", "http://anything:1/x"); err != nil {
		t.Errorf("development default refuses: %v", err)
	}
	if err := dev.Allowed("locked", "https://hooks.example.com/"); err == nil {
		t.Error("a configured list does not override the development default")
	}
}

// The dialer refuses a member's address after resolution, so a callback
// that got past the submit check (a name re-pointed at a member, DNS
// rebinding) still cannot reach it. No connection is made, and the attempt
// fails as "blocked" (not down: the breaker is not charged).
func TestDialerRefusesMembers(t *testing.T) {
	addr, port, hits := memberServer(t)
	e := newExecutor(t, transport.Options{Policy: &transport.Policy{Members: staticMembers{addr}, DefaultAllow: true}})
	for _, u := range []string{"http://" + addr + "/v1/breakers/force", "http://localhost:" + port + "/v1/breakers/force"} {
		res, err := execute(t, e, rawCallback(u))
		checkOutcome(t, res, err, false, 0)
		if !strings.HasPrefix(res.Message, "transport error: "+transport.ConnBlocked) {
			t.Errorf("%s: Message = %q", u, res.Message)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the member received %d requests", n)
	}
	// The same executor still reaches a non-member.
	other, _, otherHits := memberServer(t)
	res, err := execute(t, e, rawCallback("http://"+other+"/cb"))
	if err != nil || res.Outcome != transport.OutcomeSucceeded || otherHits.Load() != 1 {
		t.Fatalf("non-member: %+v %v (hits %d)", res, err, otherHits.Load())
	}
}

// An endpoint URL (registered by an operator) is checked against the global
// list only when one is set; a member's address is always refused.
func TestPolicyCheckEndpoint(t *testing.T) {
	ctx := context.Background()
	addr, _, _ := memberServer(t)
	var global hostRules
	p := &transport.Policy{Members: staticMembers{addr}, Allowlist: func(ns string) (transport.AddressMatcher, bool) {
		return global, ns == "" && global != nil
	}}
	if err := p.CheckEndpoint(ctx, "https://nexus.example.com/ep"); err != nil {
		t.Fatalf("no global list, deny-by-default node: endpoint refused: %v", err)
	}
	if err := p.CheckEndpoint(ctx, "http://"+addr+"/nexus"); err == nil {
		t.Fatal("an endpoint at a member's address is allowed")
	}
	global = hostRules{"https://nexus.example.com": true}
	if err := p.CheckEndpoint(ctx, "https://nexus.example.com/ep"); err != nil {
		t.Fatalf("listed endpoint refused: %v", err)
	}
	if err := p.CheckEndpoint(ctx, "https://other.example.com/ep"); err == nil {
		t.Fatal("an endpoint outside a configured global list is allowed")
	}
}

// versionedMembers is a member list with a version, counting its reads.
type versionedMembers struct {
	addrs   atomic.Pointer[[]string]
	version atomic.Uint64
	ready   atomic.Bool
	reads   atomic.Int32
}

func (m *versionedMembers) MemberAddrs() []string { m.reads.Add(1); return *m.addrs.Load() }
func (m *versionedMembers) MemberAddrsVersion() (uint64, bool) {
	return m.version.Load(), m.ready.Load()
}

// A VersionedMemberAddrs is read and parsed once per version, not at every
// check; a new version (a member joined) is read at the next check, and
// the new member is refused; while the source says its list cannot be
// reused yet, every check reads it.
func TestPolicyReadsVersionedMembersOncePerVersion(t *testing.T) {
	a1, _, _ := memberServer(t)
	a2, _, _ := memberServer(t)
	m := &versionedMembers{}
	m.addrs.Store(&[]string{a1})
	p := &transport.Policy{Members: m, DefaultAllow: true}
	ctx := context.Background()
	check := func(addr string) error { return p.Check(ctx, "ns", "http://"+addr+"/cb") }

	for range 3 { // not ready: read every time
		if err := check(a1); err == nil {
			t.Fatalf("%s allowed", a1)
		}
	}
	if got := m.reads.Load(); got != 3 {
		t.Fatalf("not ready: %d reads for 3 checks, want 3", got)
	}
	m.ready.Store(true)
	m.reads.Store(0)
	for range 5 {
		if err := check(a1); err == nil {
			t.Fatalf("%s allowed", a1)
		}
		if err := check(a2); err != nil {
			t.Fatalf("%s (not a member yet): %v", a2, err)
		}
	}
	if got := m.reads.Load(); got != 1 {
		t.Fatalf("one version: %d reads for 10 checks, want 1", got)
	}
	m.addrs.Store(&[]string{a1, a2})
	m.version.Add(1)
	var de *transport.DestinationError
	if err := check(a2); !errors.As(err, &de) {
		t.Fatalf("%s after it joined: %v, want a DestinationError", a2, err)
	}
	if got := m.reads.Load(); got != 2 {
		t.Fatalf("after a new version: %d reads, want 2", got)
	}
}
