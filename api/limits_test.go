package api

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
)

// startLimited serves a server with a JSON route (POST /j, a stand-in for a
// submit) on a real loopback listener, so the listener's connection cap
// applies.
func startLimited(t *testing.T, lim Limits) (*Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s := New(Config{Addr: "127.0.0.1:0", Limits: lim, Registerer: reg}, Deps{}, nil)
	s.handle("POST /j", needNothing, func(w http.ResponseWriter, r *http.Request) error {
		var v map[string]any
		if err := s.readJSON(w, r, &v); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s, reg
}

// fresh is a client that opens a new connection for every request.
func fresh() *http.Client {
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// slowBody opens a connection and starts a POST whose body never finishes.
func slowBody(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "POST /j HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":"); err != nil {
		t.Fatal(err)
	}
	return c
}

// 200 clients that send their bodies too slowly are answered 408 at the
// body deadline while /healthz and a submit on other connections answer
// at once.
func TestSlowBodiesCutAtDeadline(t *testing.T) {
	const clients = 200
	const bodyTimeout = 500 * time.Millisecond
	s, _ := startLimited(t, Limits{BodyTimeout: bodyTimeout})
	start := time.Now()
	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i] = slowBody(t, s.Addr())
		defer conns[i].Close()
	}
	hc := fresh()
	resp, err := hc.Get("http://" + s.Addr() + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz while %d bodies trickle: %v %v", clients, resp, err)
	}
	resp.Body.Close()
	resp, err = hc.Post("http://"+s.Addr()+"/j", "application/json", strings.NewReader(`{"ok":1}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("submit while %d bodies trickle: %v %v", clients, resp, err)
	}
	resp.Body.Close()
	if time.Since(start) > bodyTimeout {
		t.Logf("note: the healthz and submit calls took %v", time.Since(start))
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				errs <- fmt.Errorf("client %d: %v", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				errs <- fmt.Errorf("client %d: status %d, want 408", i, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	elapsed := time.Since(start)
	if elapsed < bodyTimeout || elapsed > bodyTimeout+5*time.Second {
		t.Fatalf("%d slow bodies cut after %v; want about %v", clients, elapsed, bodyTimeout)
	}
	if got := testutil.ToFloat64(s.metrics.bodyTimeouts); got != clients {
		t.Fatalf("fusebox_http_body_timeouts_total = %v, want %d", got, clients)
	}
}

// A body that arrives in time lifts the deadline: a handler that runs
// longer than the body timeout is not cancelled.
func TestBodyDeadlineLiftedAfterBody(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(Config{Addr: "127.0.0.1:0", Limits: Limits{BodyTimeout: 100 * time.Millisecond}, Registerer: reg}, Deps{}, nil)
	s.handle("POST /slow", needNothing, func(w http.ResponseWriter, r *http.Request) error {
		var v map[string]any
		if err := s.readJSON(w, r, &v); err != nil {
			return err
		}
		select {
		case <-time.After(400 * time.Millisecond):
		case <-r.Context().Done():
			return fmt.Errorf("handler cancelled: %w", r.Context().Err())
		}
		w.WriteHeader(204)
		return nil
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	resp, err := fresh().Post("http://"+s.Addr()+"/slow", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("status %d %s; want 204", resp.StatusCode, b)
	}
}

// Over --max-conns, /healthz and /readyz still answer (Connection: close)
// from the reserve, other routes get 503 with Retry-After, and past the
// reserve a connection is closed at once; freed slots serve again.
func TestConnectionCapKeepsHealthAnswering(t *testing.T) {
	const maxConns, reserve = 20, 3
	// The reserve deadline outlasts the test's fill of the reserve (a
	// reserve connection closed meanwhile would free a slot for the next).
	s, _ := startLimited(t, Limits{MaxConns: maxConns, HealthReserve: reserve, ReserveDeadline: 30 * time.Second})
	var idle []net.Conn
	for range maxConns {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	testwait.For(t, 5*time.Second, "the cap to fill", func() bool { return testutil.ToFloat64(s.metrics.conns) == maxConns })
	hc := fresh()
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := hc.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatalf("%s over the cap: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !resp.Close {
			t.Fatalf("%s over the cap: %d (close %v); want 200 with Connection: close", path, resp.StatusCode, resp.Close)
		}
	}
	resp, err := hc.Post("http://"+s.Addr()+"/j", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("submit over the cap: %d Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Fill the reserve with idle connections too: the next is closed. A
	// connection that is not closed took a reserve slot (one the health
	// requests' connections gave back late, on a loaded machine): it is
	// held, and the next dial tries again.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	testwait.For(t, 15*time.Second, "a connection past the reserve to be closed", func() bool {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			return false
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err = c.Read(make([]byte, 1))
		if isTimeout(err) {
			held = append(held, c)
			return false
		}
		c.Close()
		return err == io.EOF || err != nil && testutil.ToFloat64(s.metrics.connsOverCap.WithLabelValues("closed")) > 0
	})
	if len(held) > reserve {
		t.Fatalf("%d idle connections held open over the cap; the reserve is %d", len(held), reserve)
	}
	for _, c := range idle {
		c.Close()
	}
	testwait.For(t, 5*time.Second, "a submit once slots are free", func() bool {
		resp, err := hc.Post("http://"+s.Addr()+"/j", "application/json", strings.NewReader(`{}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Clients without a token that start a body and never finish it are
// refused (401) and their connections closed at once: neither the refusal
// nor net/http's drain of the unread body waits for the body, so they hold
// no --max-conns slot.
func TestRefusedSlowBodiesAreBounded(t *testing.T) {
	const clients = 50
	const bodyTimeout = 300 * time.Millisecond
	s := New(Config{Addr: "127.0.0.1:0", AdminToken: "tok", Limits: Limits{BodyTimeout: bodyTimeout}}, Deps{}, nil)
	s.handle("POST /j", needAdmin, func(w http.ResponseWriter, r *http.Request) error {
		t.Error("the handler ran for a request without a token")
		return nil
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	start := time.Now()
	var wg sync.WaitGroup
	for i := range clients {
		c := slowBody(t, s.Addr())
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("client %d: %d, want 401", i, resp.StatusCode)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("client %d: connection still open after the refusal: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > bodyTimeout {
		t.Fatalf("refusing %d slow bodies took %v; want well under the body timeout %v", clients, d, bodyTimeout)
	}
}

// The cap works on a TLS listener the caller wraps (the node serves HTTPS
// that way) without hiding the *tls.Conn from the server: requests see
// their TLS state, and connections are counted and released.
func TestConnectionCapOverTLS(t *testing.T) {
	certSrc := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate and a client that trusts it
	defer certSrc.Close()
	reg := prometheus.NewRegistry()
	s := New(Config{Limits: Limits{MaxConns: 4}, Registerer: reg}, Deps{}, nil)
	s.handle("GET /tls", needNothing, func(w http.ResponseWriter, r *http.Request) error {
		if r.TLS == nil || !r.TLS.HandshakeComplete {
			return Errorf(http.StatusInternalServerError, CodeInternal, "no TLS state on the request")
		}
		w.WriteHeader(204)
		return nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Serve(tls.NewListener(ln, certSrc.TLS))
	defer s.Close(context.Background())
	hc := certSrc.Client()
	hc.Transport.(*http.Transport).DisableKeepAlives = true
	for range 10 { // more than MaxConns, one at a time: slots are given back
		resp, err := hc.Get("https://" + s.Addr() + "/tls")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 204 {
			t.Fatalf("GET /tls: %d %s", resp.StatusCode, b)
		}
	}
	testwait.For(t, 5*time.Second, "every slot given back", func() bool { return testutil.ToFloat64(s.metrics.conns) == 0 })
}
