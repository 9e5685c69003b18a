package transport_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"fusebox/transport"
)

// countingConn counts the writes made on a client connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A Nexus start goes out in one write, headers and body together, like a
// POST of a bytes.Reader: the sdk's body reader made net/http flush the
// headers first, so the destination woke and read twice per call.
func TestNexusStartSendsOneWrite(t *testing.T) {
	base, s := newNexusServer(t)
	var writes atomic.Int64
	dialer := &net.Dialer{}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, writes: &writes}, nil
		},
	}}
	defer client.CloseIdleConnections()
	e := newExecutor(t, transport.Options{HTTPClient: client})
	r := startReq(base, "echo")
	for i := range 3 {
		before := writes.Load()
		res, err := execute(t, e, r)
		if err != nil || res.Outcome != transport.OutcomeSucceeded || string(res.Output) != string(r.Input) {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("call %d took %d writes, want 1", i, n)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chunked || s.contentLength != int64(len(r.Input)) {
		t.Fatalf("body sent chunked=%v with length %d, want %d", s.chunked, s.contentLength, len(r.Input))
	}
}
