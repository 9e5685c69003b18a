package transport_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// wantBlocked asserts an attempt was refused by the dialer (or, with
// invalid, by Validate before any dial): failed, not down, and no request
// reached hits.
func wantBlocked(t *testing.T, e *transport.Executor, url string, hits *atomic.Int32) {
	t.Helper()
	before := hits.Load()
	res, err := execute(t, e, rawCallback(url))
	if res.Outcome != transport.OutcomeFailed || breakerpool.IsDestinationDown(err) {
		t.Errorf("%s: outcome %v, err %v; want failed (not down)", url, res.Outcome, err)
	}
	if !strings.HasPrefix(res.Message, "transport error: "+transport.ConnBlocked) && !strings.HasPrefix(res.Message, "invalid outbound request") {
		t.Errorf("%s: Message = %q; want the dialer's or Validate's refusal", url, res.Message)
	}
	if n := hits.Load() - before; n != 0 {
		t.Errorf("%s: %d requests reached the server", url, n)
	}
}

// Hole 1: a URL with an empty host (http://:PORT/) used to pass Validate
// and the member check, and Go dials ":PORT" — this host — so a callback
// reached the node's own API. Validate refuses it naming the field, the
// policy refuses it, and the dialer fails closed on an address it cannot
// parse, an empty one, or an unspecified one.
func TestEmptyHostRefused(t *testing.T) {
	addr, port, hits := memberServer(t)
	p := &transport.Policy{Members: staticMembers{addr}, DefaultAllow: true}
	ctx := context.Background()
	for _, u := range []string{"http://:" + port + "/v1/breakers/force", "https://:" + port + "/x", "http://:" + port, "http://[]:" + port + "/"} {
		r := rawCallback(u)
		var ve *transport.ValidationError
		if err := r.Validate(); !errors.As(err, &ve) || ve.Field != "url" {
			t.Errorf("Validate(%s) = %v; want a ValidationError naming url", u, err)
		}
		start := transport.Request{TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: "https://nexus.example.com/ep",
			Service: "s", Operation: "o", RequestID: "r", CallbackURL: u}
		if err := start.Validate(); !errors.As(err, &ve) || ve.Field != "callback_url" {
			t.Errorf("Validate(callback_url %s) = %v; want a ValidationError naming callback_url", u, err)
		}
		var de *transport.DestinationError
		if err := p.Check(ctx, "ns", u); !errors.As(err, &de) {
			t.Errorf("Check(%s) = %v; want a DestinationError", u, err)
		}
		if err := p.CheckEndpoint(ctx, u); !errors.As(err, &de) {
			t.Errorf("CheckEndpoint(%s) = %v; want a DestinationError", u, err)
		}
	}
	// The dialer, whatever the policy holds (members or not), refuses what
	// it cannot judge.
	for _, pol := range []*transport.Policy{p, {DefaultAllow: true}} {
		for _, a := range []string{":" + port, "", "[]:" + port, "0.0.0.0:" + port, "[::]:" + port, "0.0.0.0:1", "not-an-ip:80", "127.0.0.1"} {
			var de *transport.DestinationError
			if err := pol.DialControl("tcp", a, nil); !errors.As(err, &de) {
				t.Errorf("DialControl(%q) = %v; want a DestinationError", a, err)
			}
		}
	}
	e := newExecutor(t, transport.Options{Policy: p})
	wantBlocked(t, e, "http://:"+port+"/v1/breakers/force", hits)
}

// Hole 2: the dialer gets a zoned IPv6 address ("[::1%lo]:PORT") for a URL
// like http://[::1%25lo]:PORT/; net.ParseIP refused the zone, and the
// address was let through. The zone is ignored now: a member's port on a
// zoned loopback address is refused.
func TestDialRefusesZonedMember(t *testing.T) {
	for _, c := range []struct{ member, dial string }{
		{"[::1]:8470", "[::1%lo]:8470"},
		{"[::]:8470", "[::1%lo]:8470"},                 // a wildcard bind: every local address
		{"[fe80::1%eth0]:8470", "[fe80::1%eth1]:8470"}, // zones ignored on both sides
		{"127.0.0.1:8470", "[::ffff:127.0.0.1%lo]:8470"},
	} {
		p := &transport.Policy{Members: staticMembers{c.member}, DefaultAllow: true}
		var de *transport.DestinationError
		if err := p.DialControl("tcp6", c.dial, nil); !errors.As(err, &de) {
			t.Errorf("member %s: DialControl(%q) = %v; want a DestinationError", c.member, c.dial, err)
		}
	}

	// Through the executor, on a real IPv6 loopback listener.
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	e := newExecutor(t, transport.Options{Policy: &transport.Policy{Members: staticMembers{"[::1]:" + port}, DefaultAllow: true}})
	wantBlocked(t, e, "http://[::1%25lo]:"+port+"/v1/breakers/force", &hits)
	wantBlocked(t, e, "http://[::1]:"+port+"/v1/breakers/force", &hits)
}

// Hole 5: on a node that is not loopback-only, an allowed name that
// resolves to loopback (or link-local: cloud metadata, or multicast, or
// unspecified) is refused at dial; private ranges are not.
func TestDialRefusesSpecialAddresses(t *testing.T) {
	dest, port, hits := memberServer(t) // a plain destination here, not a member
	e := newExecutor(t, transport.Options{Policy: &transport.Policy{}})
	for _, u := range []string{"http://localhost:" + port + "/cb", "http://" + dest + "/cb", "http://[::ffff:127.0.0.1]:" + port + "/cb"} {
		wantBlocked(t, e, u, hits)
	}
	p := &transport.Policy{}
	for _, a := range []string{"127.0.0.1:80", "127.9.9.9:443", "[::1]:80", "169.254.169.254:80", "[fe80::1%eth0]:80",
		"224.0.0.1:80", "[ff02::1]:80", "[::ffff:169.254.169.254]:80", "0.0.0.0:80", "[::]:80"} {
		var de *transport.DestinationError
		if err := p.DialControl("tcp", a, nil); !errors.As(err, &de) {
			t.Errorf("DialControl(%q) = %v; want a DestinationError", a, err)
		}
	}
	for _, a := range []string{"10.1.2.3:7233", "192.168.1.1:443", "172.16.0.9:80", "[fd00::1]:443", "8.8.8.8:443", "[2001:db8::1]:443"} {
		if err := p.DialControl("tcp", a, nil); err != nil {
			t.Errorf("DialControl(%q) = %v; want allowed", a, err)
		}
	}
	// A loopback-only (development) node still dials loopback.
	dev := newExecutor(t, transport.Options{Policy: &transport.Policy{DefaultAllow: true}})
	if res, err := execute(t, dev, rawCallback("http://localhost:"+port+"/cb")); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("development node: %+v %v", res, err)
	}
}

// fakeResolver resolves the names it holds, counting lookups; any other
// name does not resolve.
type fakeResolver struct {
	names map[string][]netip.Addr
	calls atomic.Int32
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.calls.Add(1)
	if ips, ok := r.names[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Hole 4: a member advertised by a DNS name was never matched (only
// wildcard binds, "localhost" and IP literals were). Its name is compared
// with URL hosts (any case, trailing dot or not), and what it resolves to is
// compared at submit and at dial; the resolution is cached.
func TestMemberNamesRefused(t *testing.T) {
	addr, port, hits := memberServer(t)
	res := &fakeResolver{names: map[string][]netip.Addr{"fusebox-1.cluster.internal": {netip.MustParseAddr("127.0.0.1")}}}
	p := &transport.Policy{Members: staticMembers{"Fusebox-1.Cluster.Internal.:" + port}, Resolver: res, DefaultAllow: true}
	ctx := context.Background()
	for _, u := range []string{
		"http://fusebox-1.cluster.internal:" + port + "/v1/breakers/force",
		"http://FUSEBOX-1.cluster.internal.:" + port + "/x", // compared as a name: the resolver does not know it
		"http://" + addr + "/x", // the address the member's name resolves to
		"http://[::ffff:127.0.0.1]:" + port + "/x",
	} {
		var de *transport.DestinationError
		if err := p.Check(ctx, "ns", u); !errors.As(err, &de) || !strings.Contains(err.Error(), "member") {
			t.Errorf("Check(%s) = %v; want the member refusal", u, err)
		}
	}
	if err := p.Check(ctx, "ns", "http://fusebox-1.cluster.internal:1/x"); err != nil {
		t.Errorf("another port of the member's host is refused: %v", err)
	}
	e := newExecutor(t, transport.Options{Policy: p})
	wantBlocked(t, e, "http://"+addr+"/v1/breakers/force", hits)
	wantBlocked(t, e, "http://localhost:"+port+"/v1/breakers/force", hits) // the dialer resolves localhost itself

	// Cached: many dials, at most one lookup of the member's name.
	before := res.calls.Load()
	for range 50 {
		if err := p.DialControl("tcp", addr, nil); err == nil {
			t.Fatal("the member's address is allowed")
		}
	}
	if n := res.calls.Load() - before; n > 1 {
		t.Errorf("%d lookups of the member's name for 50 dials", n)
	}
}

// Hole 5's opt-in: a node that is not loopback-only dials a loopback,
// link-local or multicast address only when an allowlist pattern names that
// IP as a literal (with a matching port); a glob or a name opens nothing,
// and a member stays refused.
func TestDialOptInByIPLiteral(t *testing.T) {
	dest, port, hits := memberServer(t) // a destination, not a member
	call := func(patterns ...string) transport.Result {
		t.Helper()
		e := newExecutor(t, transport.Options{Policy: &transport.Policy{AllowlistPatterns: func() []string { return patterns }}})
		res, _ := execute(t, e, rawCallback("http://localhost:"+port+"/cb"))
		return res
	}
	for _, pats := range [][]string{{"127.0.0.1:" + port}, {"hooks.example.com", "127.0.0.1:*"}, {"127.0.0.1:" + port[:1] + "*"}} {
		before := hits.Load()
		if res := call(pats...); res.Outcome != transport.OutcomeSucceeded || hits.Load() != before+1 {
			t.Errorf("patterns %q: %+v; want the call made", pats, res)
		}
	}
	for _, pats := range [][]string{nil, {"*"}, {"127.0.0.*:*"}, {"localhost:*"}, {"127.0.0.1:1"}, {"127.0.0.1"}, {"127.0.0.2:*"}, {"[::1]:*"}} {
		before := hits.Load()
		if res := call(pats...); res.Outcome != transport.OutcomeFailed || !strings.Contains(res.Message, transport.ConnBlocked) || hits.Load() != before {
			t.Errorf("patterns %q: %+v; want blocked", pats, res)
		}
	}
	for _, c := range []struct {
		pattern, addr string
		open          bool
	}{
		{"127.0.0.1", "127.0.0.1:80", true}, {"127.0.0.1", "127.0.0.1:443", true}, {"127.0.0.1", "127.0.0.1:8080", false},
		{"[::1]:80*", "[::1]:8080", true}, {"[::1]:80*", "[::1]:90", false}, {"::1", "[::1]:80", false},
		{"169.254.169.254", "169.254.169.254:80", true}, {"169.254.169.254:*", "169.254.169.253:80", false},
		{"[fe80::1]:*", "[fe80::1%eth0]:7", true}, {"0.0.0.0:*", "0.0.0.0:80", false}, {"[::]:*", "[::]:80", false},
	} {
		p := &transport.Policy{AllowlistPatterns: func() []string { return []string{c.pattern} }}
		if err := p.DialControl("tcp", c.addr, nil); (err == nil) != c.open {
			t.Errorf("pattern %q, dial %s: %v; want open=%v", c.pattern, c.addr, err, c.open)
		}
	}
	member := &transport.Policy{Members: staticMembers{dest}, AllowlistPatterns: func() []string { return []string{"127.0.0.1:*"} }}
	if err := member.DialControl("tcp", dest, nil); err == nil {
		t.Error("an IP literal in the allowlist opens a member's address")
	}
}

// hangingResolver answers no lookup until its caller gives up.
type hangingResolver struct{ calls atomic.Int32 }

func (r *hangingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	r.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A host whose DNS hangs is looked up once, however many tasks of a batch
// (or concurrent submits) name it: each lookup waited out its timeout in
// turn, about 17 minutes for a batch of 500. The URL is let through, as a
// failed lookup always was (the dialer checks what it connects to).
func TestHangingLookupOnce(t *testing.T) {
	res := &hangingResolver{}
	p := &transport.Policy{Members: staticMembers{"127.0.0.1:1"}, Resolver: res, DefaultAllow: true, ResolveTimeout: 200 * time.Millisecond}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := p.CheckMembers(t.Context(), "http://hangs.example:8080/cb"); err != nil {
				t.Errorf("CheckMembers: %v", err)
			}
		})
	}
	wg.Wait()
	for range 500 {
		if err := p.CheckMembers(t.Context(), "http://hangs.example:8080/cb"); err != nil {
			t.Fatalf("CheckMembers: %v", err)
		}
	}
	if n := res.calls.Load(); n != 1 {
		t.Errorf("%d lookups of one hanging host, want 1", n)
	}
}
