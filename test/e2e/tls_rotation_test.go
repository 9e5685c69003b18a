package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// servedIssuer is the issuer of the certificate p's API presents now.
func servedIssuer(p *Process, cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: apiTimeout}, "tcp", p.HTTPAddr(), cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
}

// TestTLSRollingRotationBySIGHUP rotates a running cluster to a new CA
// with SIGHUP only, while a writer keeps writing round-robin through every
// node (so followers keep forwarding to the leader): the CA file gains the
// new CA and every node reloads it; then one node at a time gets a
// certificate of the new CA and a SIGHUP; then the old CA leaves the CA
// file. No write may fail, and writes must keep being acknowledged after
// every step. A restarted node then rejoins with new Raft connections.
func TestTLSRollingRotationBySIGHUP(t *testing.T) {
	c, pki := newTLSCluster(t)
	c.WaitForLeader(t, leaderTimeout)
	w := NewWriter(c, "rot-", "http://127.0.0.1:9/nexus")
	w.Run(20 * time.Millisecond)
	defer w.Stop()

	progress := func(step string) {
		t.Helper()
		from := w.Acked()
		testwait.ForErr(t, 20*time.Second, "writes acknowledged after "+step, func() error {
			if s := w.Stats(); s.Failed > 0 {
				t.Fatalf("after %s: a write failed: %v (last error %v)", step, s, s.LastErr)
			}
			if n := w.Acked(); n < from+10 {
				return fmt.Errorf("%d writes acknowledged since %s, want 10", n-from, step)
			}
			return nil
		})
	}
	reloads := func(p *Process) float64 {
		m, err := scrapeMetrics(p)
		if err != nil {
			t.Fatal(err)
		}
		return metricSum(m, "fusebox_tls_reloads_total", `result="ok"`)
	}
	hup := func(p *Process) {
		t.Helper()
		before := reloads(p)
		if _, err := p.signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testwait.ForErr(t, 10*time.Second, p.Name()+" to reload on SIGHUP", func() error {
			if !p.LogContains("SIGHUP: reloading") {
				return fmt.Errorf("no SIGHUP in the log")
			}
			if r := reloads(p); r <= before {
				return fmt.Errorf("fusebox_tls_reloads_total{result=ok} %v, want > %v", r, before)
			}
			return nil
		})
	}
	progress("start")

	// 1. Trust the new CA everywhere.
	pki.RotateCA()
	for _, p := range c.Procs {
		hup(p)
	}
	progress("the CA file gained the new CA")

	// 2. One node at a time: a certificate of the new CA, then SIGHUP.
	for _, p := range c.Procs {
		pki.NodeTLS(p.Name())
		hup(p)
		testwait.ForErr(t, 10*time.Second, p.Name()+" to present a certificate of the new CA", func() error {
			iss, err := servedIssuer(p, pki.client)
			if err == nil && iss != "e2e CA 2" {
				err = fmt.Errorf("issuer %q", iss)
			}
			return err
		})
		progress(p.Name() + "'s new certificate")
	}

	// 3. The old CA leaves the CA file: a certificate of the old CA is
	// refused from now on.
	pki.DropFirstCA()
	for _, p := range c.Procs {
		hup(p)
	}
	progress("the old CA left the CA file")
	old := strangerConfig(pki.client.Certificates[0])
	old.InsecureSkipVerify, old.RootCAs = false, pki.client.RootCAs
	hc := &http.Client{Timeout: apiTimeout, Transport: &http.Transport{TLSClientConfig: old}}
	resp, err := hc.Get("https://" + c.Procs[0].HTTPAddr() + "/v1/cluster/raft")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a client certificate of the removed CA was accepted: HTTP %d", resp.StatusCode)
	}
	if !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Fatalf("a client certificate of the removed CA: %v, want unknown certificate authority", err)
	}
	hc.CloseIdleConnections()

	// 4. New Raft and forwarding connections use the new certificates: a
	// restarted follower rejoins and the writes go on.
	f := c.Followers(t)[0]
	if err := f.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	progress(f.Name() + "'s restart")
	w.Stop()
	s := w.Stats()
	t.Logf("rotation: writer %v", s)
	if s.Failed > 0 {
		t.Fatalf("writes failed during the rotation: %v (last error %v)", s, s.LastErr)
	}
	w.WaitVerified(t, convergeTimout, c.Procs)
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}
