package transport_test

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"fusebox/transport"
)

// needLoopbackAlias skips the test when this host cannot send from ip (a
// loopback address other than 127.0.0.1: every one of 127/8 on Linux, only
// configured aliases elsewhere).
func needLoopbackAlias(t *testing.T, ip string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot bind %s on this host: %v", ip, err)
	}
	_ = ln.Close()
}

// sourceRecorder is a server that remembers the source IP of every request.
type sourceRecorder struct {
	mu  sync.Mutex
	ips []string
}

func (s *sourceRecorder) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = "unparsable " + r.RemoteAddr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ips = append(s.ips, host)
}

// take returns the source IPs recorded since the last take.
func (s *sourceRecorder) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ips
	s.ips = nil
	return out
}

// Options.LocalAddr is the source of the executor's calls and of what goes
// through its HTTPClient (the health prober's calls), with the policy's
// dialer guard still in force.
func TestLocalAddrIsTheSourceOfCalls(t *testing.T) {
	const src = "127.0.0.2"
	needLoopbackAlias(t, src)
	rec := &sourceRecorder{}
	dest := newServer(t, rec) // on 127.0.0.1
	member, _, memberHits := memberServer(t)

	e := newExecutor(t, transport.Options{
		LocalAddr: src,
		Policy:    &transport.Policy{Members: staticMembers{member}, DefaultAllow: true},
	})
	for _, k := range kinds {
		res, err := execute(t, e, k.req(dest.URL))
		if err != nil && k.name != "start" && k.name != "cancel" { // the recorder is no Nexus handler
			t.Errorf("%s: %+v, %v", k.name, res, err)
		}
		if got := rec.take(); len(got) != 1 || got[0] != src {
			t.Errorf("%s: the destination saw requests from %q; want one from %s", k.name, got, src)
		}
	}

	resp, err := e.HTTPClient().Get(dest.URL + "/health")
	if err != nil {
		t.Fatalf("GET through HTTPClient: %v", err)
	}
	_ = resp.Body.Close()
	if got := rec.take(); len(got) != 1 || got[0] != src {
		t.Errorf("HTTPClient: the destination saw requests from %q; want one from %s", got, src)
	}

	wantBlocked(t, e, "http://"+member+"/v1/breakers/force", memberHits)

	// Without LocalAddr the kernel picks 127.0.0.1 for a 127.0.0.1
	// destination: the check above is not vacuous.
	plain := newExecutor(t, transport.Options{})
	if res, err := execute(t, plain, rawCallback(dest.URL+"/cb")); err != nil {
		t.Fatalf("without LocalAddr: %+v, %v", res, err)
	}
	if got := rec.take(); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Errorf("without LocalAddr: the destination saw requests from %q; want one from 127.0.0.1", got)
	}
}

// New refuses a LocalAddr that is not an IP address, or one this host
// cannot send from, naming the field and the value.
func TestLocalAddrRefusedWhenInvalid(t *testing.T) {
	bad := []string{"x", "127.0.0.2:80", "10.0.0.0/8", "999.1.1.1", " 127.0.0.1", "localhost", "[::1]"}
	// 192.0.2.1 (TEST-NET-1) is on no interface, unless this host binds
	// any address (net.ipv4.ip_nonlocal_bind).
	if ln, err := net.Listen("tcp", "192.0.2.1:0"); err == nil {
		_ = ln.Close()
	} else {
		bad = append(bad, "192.0.2.1")
	}
	for _, v := range bad {
		e, err := transport.New(transport.Options{LocalAddr: v})
		if err == nil {
			_ = e.Close()
			t.Errorf("New(LocalAddr %q) succeeded; want an error", v)
			continue
		}
		if !strings.Contains(err.Error(), "LocalAddr") || !strings.Contains(err.Error(), v) {
			t.Errorf("New(LocalAddr %q) = %v; want an error naming LocalAddr and the value", v, err)
		}
	}
	// Refused even with a caller's client, which it would not apply to.
	if _, err := transport.New(transport.Options{LocalAddr: "x", HTTPClient: http.DefaultClient}); err == nil {
		t.Error("New(LocalAddr x, HTTPClient) succeeded; want an error")
	}
	for _, v := range []string{"", "127.0.0.1", "::ffff:127.0.0.1"} {
		e, err := transport.New(transport.Options{LocalAddr: v})
		if err != nil {
			t.Errorf("New(LocalAddr %q) = %v; want success", v, err)
			continue
		}
		_ = e.Close()
	}
}
