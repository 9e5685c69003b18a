package tlsutil

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func mustHolder(t *testing.T, f Files) *Holder {
	t.Helper()
	h, err := New(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func TestChainVerifiesMutually(t *testing.T) {
	p := newPKI(t, "ca-1")
	srv := mustHolder(t, p.issue("n1", CertOptions{Node: true}))
	cli := mustHolder(t, p.issue("n2", CertOptions{Node: true}))
	cerr, serr := handshake(t, srv.RaftServerConfig(), cli.PeerClientConfig())
	if cerr != nil || serr != nil {
		t.Fatalf("node to node: client %v, server %v", cerr, serr)
	}
	// The CLI verifies the host name: 127.0.0.1 is in every node
	// certificate by default.
	cc, err := ClientConfig(ClientFiles{CAFile: p.caFile()})
	if err != nil {
		t.Fatal(err)
	}
	if cerr, serr := handshake(t, srv.APIServerConfig(), cc); cerr != nil || serr != nil {
		t.Fatalf("CLI without a client certificate to the API: client %v, server %v", cerr, serr)
	}
	cc.ServerName = "elsewhere.example"
	if cerr, _ := handshake(t, srv.APIServerConfig(), cc); cerr == nil || !strings.Contains(cerr.Error(), "elsewhere.example") {
		t.Fatalf("a name not in the certificate: %v, want a host name error", cerr)
	}
}

func TestAnotherCARefused(t *testing.T) {
	good, evil := newPKI(t, "ca-good"), newPKI(t, "ca-evil")
	srv := mustHolder(t, good.issue("n1", CertOptions{Node: true}))
	stranger := mustHolder(t, evil.issue("x", CertOptions{Node: true}))
	// The stranger does not care whom it talks to; it presents its node
	// certificate from the other CA.
	// (GetClientCertificate: Go's client would otherwise send no
	// certificate to a server that names other acceptable CAs.)
	bare := &tls.Config{InsecureSkipVerify: true, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &stranger.Current().Cert, nil
	}}
	_, serr := handshake(t, srv.RaftServerConfig(), bare)
	if serr == nil || !strings.Contains(serr.Error(), "unknown authority") {
		t.Fatalf("raft server accepted a client from another CA: %v", serr)
	}
	_, serr = handshake(t, srv.APIServerConfig(), bare)
	if serr == nil || !strings.Contains(serr.Error(), "unknown authority") {
		t.Fatalf("API server accepted a client certificate from another CA: %v", serr)
	}
	// And the other way: a node does not talk to a server of another CA.
	cerr, _ := handshake(t, stranger.RaftServerConfig(), srv.PeerClientConfig())
	if cerr == nil || !strings.Contains(cerr.Error(), "unknown authority") {
		t.Fatalf("peer client accepted a server from another CA: %v", cerr)
	}
}

func TestExpiredRefused(t *testing.T) {
	p := newPKI(t, "ca-1")
	srv := mustHolder(t, p.issue("n1", CertOptions{Node: true}))
	// An expired certificate cannot be loaded into a holder (Load checks
	// validity), so present it through a bare config.
	pair, err := CreateCert(p.ca, CertOptions{CommonName: "old", Node: true, Days: 1, NotBefore: time.Now().Add(-72 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	old := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: srv.Current().CAs, ServerName: "localhost"}
	for name, cfg := range map[string]*tls.Config{"raft": srv.RaftServerConfig(), "api": srv.APIServerConfig()} {
		if _, serr := handshake(t, cfg, old); serr == nil || !strings.Contains(serr.Error(), "expired") {
			t.Fatalf("%s accepted an expired client certificate: %v", name, serr)
		}
	}
	f := Files{CertFile: p.write("old.pem", pair.Cert), KeyFile: p.write("old-key.pem", pair.Key), CAFile: p.caFile()}
	if _, err := Load(f); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Load of an expired certificate: %v", err)
	}
}

func TestRaftRefusesClientOnlyCertificate(t *testing.T) {
	p := newPKI(t, "ca-1")
	srv := mustHolder(t, p.issue("n1", CertOptions{Node: true}))
	cf := p.issue("alice", CertOptions{})
	cc, err := ClientConfig(ClientFiles{CAFile: cf.CAFile, CertFile: cf.CertFile, KeyFile: cf.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, serr := handshake(t, srv.RaftServerConfig(), cc); serr == nil || !strings.Contains(serr.Error(), "not a node certificate") {
		t.Fatalf("raft accepted a CLI client certificate: %v", serr)
	}
	if cerr, serr := handshake(t, srv.APIServerConfig(), cc); cerr != nil || serr != nil {
		t.Fatalf("API refused a CLI client certificate: client %v, server %v", cerr, serr)
	}
}

func TestReloadKeepsOldOnBadFileAndTakesGoodOne(t *testing.T) {
	p := newPKI(t, "ca-1")
	f := p.issue("n1", CertOptions{Node: true})
	reg := prometheus.NewRegistry()
	h, err := New(f, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	first := h.Current().Cert.Leaf.SerialNumber

	if err := os.WriteFile(f.CertFile, []byte("-----BEGIN CERTIFICATE-----\nhalf written"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = h.Reload()
	if err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("reload of a broken cert file: %v, want an error naming --tls-cert-file", err)
	}
	if h.Current().Cert.Leaf.SerialNumber.Cmp(first) != 0 {
		t.Fatal("a failed reload replaced the certificate")
	}
	// The old material still serves.
	if cerr, serr := handshake(t, h.RaftServerConfig(), h.PeerClientConfig()); cerr != nil || serr != nil {
		t.Fatalf("after a failed reload: client %v, server %v", cerr, serr)
	}
	// A CA file without the issuing CA is also bad material.
	other := newPKI(t, "ca-2")
	caOnly := other.caFile()
	n3 := p.issue("n3", CertOptions{Node: true})
	bad := Files{CertFile: n3.CertFile, KeyFile: n3.KeyFile, CAFile: caOnly}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("cert from another CA than the bundle: %v", err)
	}

	next := p.issue("n1", CertOptions{Node: true}) // same paths, new key and serial
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	got := h.Current().Cert.Leaf.SerialNumber
	if got.Cmp(first) == 0 {
		t.Fatal("reload kept the old certificate")
	}
	m, err := Load(next)
	if err != nil {
		t.Fatal(err)
	}
	if got.Cmp(m.Cert.Leaf.SerialNumber) != 0 {
		t.Fatal("reload did not take the new certificate")
	}
	if ok, bad := testutil.ToFloat64(h.reloads.WithLabelValues("ok")), testutil.ToFloat64(h.reloads.WithLabelValues("error")); ok != 1 || bad != 1 {
		t.Fatalf("fusebox_tls_reloads_total ok=%v error=%v, want 1 and 1", ok, bad)
	}
	// A server config built before the reload presents the new certificate.
	srvCfg := h.APIServerConfig()
	cc := &tls.Config{RootCAs: h.Current().CAs, ServerName: "localhost", VerifyConnection: func(cs tls.ConnectionState) error {
		if cs.PeerCertificates[0].SerialNumber.Cmp(got) != 0 {
			t.Errorf("served serial %v, want %v", cs.PeerCertificates[0].SerialNumber, got)
		}
		return nil
	}}
	if cerr, serr := handshake(t, srvCfg, cc); cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
}

func TestPollerPicksUpChange(t *testing.T) {
	p := newPKI(t, "ca-1")
	f := p.issue("n1", CertOptions{Node: true})
	h := mustHolder(t, f)
	if err := h.Watch(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	first := h.Current().Cert.Leaf.SerialNumber
	// A rotation that adds a second CA to the bundle and a certificate
	// from it: the file sizes change, so the poller notices even within
	// the file system's mtime granularity.
	p2 := newPKI(t, "ca-2")
	pair, err := CreateCert(p2.ca, CertOptions{CommonName: "n1", Node: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.CAFile, append(append([]byte{}, p.ca.Cert...), p2.ca.Cert...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.KeyFile, pair.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.CertFile, pair.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.Current().Cert.Leaf.SerialNumber.Cmp(first) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the poller did not reload the changed files within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(h.Current().CACerts); n != 2 {
		t.Fatalf("CA bundle has %d certificates, want 2", n)
	}
	if h.Current().Cert.Leaf.Issuer.CommonName != "ca-2" {
		t.Fatalf("issuer %q, want ca-2", h.Current().Cert.Leaf.Issuer.CommonName)
	}
	// Close is idempotent and stops the poller.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	p := newPKI(t, "ca-1")
	f := p.issue("n1", CertOptions{Node: true})
	for _, tc := range []struct {
		f    Files
		want string
	}{
		{Files{CertFile: f.CertFile, KeyFile: f.KeyFile}, "--tls-ca-file is missing"},
		{Files{CertFile: f.CertFile, KeyFile: "/nonexistent/key.pem", CAFile: f.CAFile}, "--tls-key-file"},
		{Files{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: f.CertFile}, "not a CA certificate"},
		{Files{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: f.KeyFile}, "--tls-ca-file"},
		{Files{CertFile: f.CertFile, KeyFile: p.issue("n2", CertOptions{Node: true}).KeyFile, CAFile: f.CAFile}, "private key does not match"},
	} {
		if _, err := Load(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%+v): %v, want %q", tc.f, err, tc.want)
		}
	}
}

func TestCreateCertDefaults(t *testing.T) {
	p := newPKI(t, "ca-1")
	m, err := Load(p.issue("n1", CertOptions{Node: true, IPs: []net.IP{net.ParseIP("10.0.0.5")}, DNSNames: []string{"n1.example"}}))
	if err != nil {
		t.Fatal(err)
	}
	leaf := m.Cert.Leaf
	for _, name := range []string{"127.0.0.1", "10.0.0.5", "localhost", "n1.example", "server.fusebox"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("node certificate does not cover %s: %v", name, err)
		}
	}
	if _, err := CreateCert(p.ca, CertOptions{CommonName: "n1", Days: 100 * 365}); err == nil || !strings.Contains(err.Error(), "outlive") {
		t.Fatalf("a certificate outliving its CA: %v", err)
	}
	other := newPKI(t, "ca-2")
	if _, err := CreateCert(PEMPair{Cert: p.ca.Cert, Key: other.ca.Key}, CertOptions{CommonName: "n1"}); err == nil || !strings.Contains(err.Error(), "--ca-key does not match") {
		t.Fatalf("mismatched CA key: %v", err)
	}
}

// A peer call over the peer transport never goes in clear: an http://
// address (a gossiped one, say) is refused before any connection, so the
// token it would carry is not sent.
func TestPeerTransportRefusesPlainText(t *testing.T) {
	p := newPKI(t, "ca-1")
	h := mustHolder(t, p.issue("n1", CertOptions{Node: true}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	hc := &http.Client{Timeout: 5 * time.Second, Transport: h.PeerTransport()}
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/v1/breakers", nil)
	req.Header.Set("Authorization", "Bearer secret-node-token")
	resp, err := hc.Do(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("plain-text peer call succeeded")
	}
	if !errors.Is(err, ErrPlainPeer) {
		t.Errorf("err = %v, want ErrPlainPeer", err)
	}
	select {
	case <-accepted:
		t.Error("the peer transport connected in clear")
	default:
	}
}
