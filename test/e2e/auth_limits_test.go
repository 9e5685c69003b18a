package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
)

// e2e tokens, one per role.
const (
	e2eSubmitToken = "producer-0123456789abcdef0123456789abcdef"
	e2eReadToken   = "viewer-0123456789abcdef0123456789abcdef00"
	e2eAdminToken  = "ops-0123456789abcdef0123456789abcdef000000"
)

// startSecured starts one node with a named-token file and extra flags.
func startSecured(t *testing.T, extra ...string) *Process {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	body := "# e2e\nproducer submit " + e2eSubmitToken + "\nviewer read " + e2eReadToken + "\nops admin " + e2eAdminToken + "\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		cfg := ProcessConfig{NodeID: "solo", ExtraArgs: append([]string{"--admin-token-file", file}, extra...)}
		if err := assignPorts(&cfg, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
		p := NewProcess(t, cfg)
		err := p.Start(context.Background())
		if err == nil {
			return p
		}
		if !errors.Is(err, errAddrInUse) || attempt == 3 {
			t.Fatal(err)
		}
	}
}

// A submit token cannot drain a node or send raw Raft commands; reads need
// a token.
func TestScopedTokensOnRealProcess(t *testing.T) {
	p := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	producer := api.NewClient(p.HTTPAddr(), e2eSubmitToken, nil)
	for _, tc := range []struct {
		c            *api.Client
		method, path string
		in           any
		status       int
	}{
		{producer, "POST", "/v1/nodes/solo/drain", nil, 403},
		{producer, "POST", "/internal/v1/apply", map[string]any{"command": "e30="}, 403},
		{producer, "POST", "/internal/v1/apply/raw", map[string]any{"command": "e30="}, 403},
		{producer, "GET", "/v1/breakers", nil, 403},
		{api.NewClient(p.HTTPAddr(), "", nil), "GET", "/v1/breakers", nil, 401},
		{api.NewClient(p.HTTPAddr(), "", nil), "GET", "/metrics", nil, 401},
		{api.NewClient(p.HTTPAddr(), e2eReadToken, nil), "GET", "/v1/breakers", nil, 200},
		{api.NewClient(p.HTTPAddr(), e2eReadToken, nil), "DELETE", "/v1/nodes/solo/drain", nil, 403},
	} {
		err := tc.c.Do(ctx, tc.method, tc.path, nil, tc.in, nil)
		var e *api.Error
		switch {
		case tc.status == 200 && err != nil:
			t.Errorf("%s %s: %v; want 200", tc.method, tc.path, err)
		case tc.status != 200 && (!errors.As(err, &e) || e.Status != tc.status):
			t.Errorf("%s %s: %v; want %d", tc.method, tc.path, err, tc.status)
		}
	}
	if _, err := producer.SubmitTask(ctx, callbackTask("ns-sec", "wf-1", "http://127.0.0.1:9/cb", 1)); err != nil {
		var e *api.Error
		if errors.As(err, &e) && (e.Status == 401 || e.Status == 403) {
			t.Fatalf("submit with the submit token: %v", err)
		}
	}
}

// The outside tester's attack: 1,100 connections without a token that send
// a request body slowly. /healthz answers throughout and a submit with a
// token is accepted within a second of the attack starting.
func TestSlowUnauthenticatedClientsDoNotStarveHealth(t *testing.T) {
	const attackers = 1100
	p := startSecured(t, "--http-body-timeout", "2s")
	start := time.Now()
	conns := slowBodies(t, p, attackers, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"namespace_id\":")
	t.Logf("%d slow clients connected in %v", attackers, time.Since(start))

	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var worst time.Duration
	for range 10 {
		t0 := time.Now()
		resp, err := hc.Get("http://" + p.HTTPAddr() + "/healthz")
		if err != nil {
			t.Fatalf("/healthz during the attack: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz during the attack: %d", resp.StatusCode)
		}
		worst = max(worst, time.Since(t0))
	}
	producer := api.NewClient(p.HTTPAddr(), e2eSubmitToken, hc)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := producer.SubmitTask(ctx, callbackTask("ns-sec", "wf-2", "http://127.0.0.1:9/cb", 2))
	if err != nil {
		t.Fatalf("submit during the attack: %v", err)
	}
	t.Logf("during %d slow unauthenticated clients: /healthz worst %v over 10 probes, a submit %v", attackers, worst, time.Since(t0))

	// Every attacker was refused and cut off.
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Fatalf("%d of %d slow clients still connected 5 s later", open, attackers)
	}
}

// Clients with a valid token that send their bodies slowly fill
// --max-conns: /healthz and /readyz still answer from the reserve, other
// calls get 503 with Retry-After, and once the body timeout cuts the slow
// clients a submit is accepted again.
func TestSlowAuthenticatedClientsHitTheConnectionCap(t *testing.T) {
	const maxConns, attackers = 200, 300
	p := startSecured(t, "--max-conns", fmt.Sprint(maxConns), "--http-body-timeout", "2s")
	start := time.Now()
	slowBodies(t, p, attackers, "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+e2eSubmitToken+"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	// The burst itself can fill the reserve for a moment (connections past
	// it are closed at once), so the probes poll; they must be answered
	// from the reserve (Connection: close) well before the 2 s body
	// timeout frees the slow clients' slots.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/readyz"} {
		testwait.ForErr(t, time.Second, path+" answered over the cap", func() error {
			resp, err := hc.Get("http://" + p.HTTPAddr() + path)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || !resp.Close {
				return fmt.Errorf("%s: %d (Connection: close %v)", path, resp.StatusCode, resp.Close)
			}
			return nil
		})
	}
	t.Logf("/healthz and /readyz answered from the reserve %v after %d slow clients filled --max-conns %d", time.Since(start), attackers, maxConns)
	producer := api.NewClient(p.HTTPAddr(), e2eSubmitToken, hc)
	var refused, firstOK time.Duration
	testwait.ForErr(t, 15*time.Second, "a submit accepted once the slow clients are cut", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := producer.SubmitTask(ctx, callbackTask("ns-sec", "wf-3", "http://127.0.0.1:9/cb", 3))
		var e *api.Error
		if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable && e.RetryAfter > 0 && refused == 0 {
			refused = time.Since(start)
		}
		if err == nil {
			firstOK = time.Since(start)
		}
		return err
	})
	if refused == 0 {
		t.Error("no submit was refused with 503 and Retry-After while the cap was full")
	}
	t.Logf("%d slow authenticated clients, --max-conns %d, body timeout 2s: health answered over the cap; submits 503 until %v after the attack began", attackers, maxConns, firstOK)
}

// slowBodies opens n connections to p's API that each send head and then
// nothing more (a body that never arrives), and returns them; they are
// closed when the test ends.
func slowBodies(t *testing.T, p *Process, n int, head string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := net.DialTimeout("tcp", p.HTTPAddr(), 5*time.Second)
		if err != nil {
			t.Fatalf("attacker %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatalf("attacker %d: %v", i, err)
		}
	}
	return conns
}
