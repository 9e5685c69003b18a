package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/internal/tlsutil"
)

// ProcessTLS is a node's TLS material and the harness client's config.
type ProcessTLS struct {
	CertFile, KeyFile, CAFile string
	GossipKeyFile             string
	// Client is what the harness's HTTPS client uses: it trusts the
	// test's CAs and presents a client certificate.
	Client *tls.Config
}

func (t *ProcessTLS) clientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.Client
}

func (t *ProcessTLS) args() []string {
	return []string{"--tls-cert-file", t.CertFile, "--tls-key-file", t.KeyFile, "--tls-ca-file", t.CAFile, "--gossip-key-file", t.GossipKeyFile}
}

// testPKI is a cluster's CA, generated into a temp dir with tlsutil as an
// operator would with `fusebox tls`. It holds a second CA from the start,
// for rotation; nodes trust it only once RotateCA adds it to the CA file.
type testPKI struct {
	t             testing.TB
	dir           string
	caFile        string
	gossipKeyFile string
	client        *tls.Config

	mu      sync.Mutex
	cas     []tlsutil.PEMPair // [0] the first CA, [1] the next
	current int               // which CA issues node certificates
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{t: t, dir: t.TempDir()}
	for _, name := range []string{"e2e CA 1", "e2e CA 2"} {
		ca, err := tlsutil.CreateCA(tlsutil.CAOptions{CommonName: name, Days: 30})
		if err != nil {
			t.Fatal(err)
		}
		p.cas = append(p.cas, ca)
	}
	p.caFile = p.write("ca.pem", p.cas[0].Cert)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	p.gossipKeyFile = p.write("gossip.key", []byte(base64.StdEncoding.EncodeToString(key)+"\n"))
	// The harness client trusts both CAs and presents a client certificate
	// of the first (an "admin" CLI certificate).
	pool := x509.NewCertPool()
	for _, ca := range p.cas {
		pool.AppendCertsFromPEM(ca.Cert)
	}
	cli := p.issue(0, tlsutil.CertOptions{CommonName: "e2e-client", Days: 7})
	p.client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cli}}
	return p
}

// write replaces a file atomically (rename), as a careful operator does.
func (p *testPKI) write(name string, b []byte) string {
	p.t.Helper()
	f := filepath.Join(p.dir, name)
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		p.t.Fatal(err)
	}
	return f
}

func (p *testPKI) issuePair(ca int, o tlsutil.CertOptions) tlsutil.PEMPair {
	p.t.Helper()
	pair, err := tlsutil.CreateCert(p.cas[ca], o)
	if err != nil {
		p.t.Fatal(err)
	}
	return pair
}

func (p *testPKI) issue(ca int, o tlsutil.CertOptions) tls.Certificate {
	p.t.Helper()
	pair := p.issuePair(ca, o)
	c, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// Tweak is a ClusterOptions.Tweak giving each node a certificate of the
// current CA.
func (p *testPKI) Tweak(cfg *ProcessConfig) { cfg.TLS = p.NodeTLS(cfg.NodeID) }

// NodeTLS (re)writes id's certificate and key from the current CA.
func (p *testPKI) NodeTLS(id string) *ProcessTLS {
	p.t.Helper()
	p.mu.Lock()
	ca := p.current
	p.mu.Unlock()
	pair := p.issuePair(ca, tlsutil.CertOptions{CommonName: id, Node: true, Days: 7})
	return &ProcessTLS{
		KeyFile:  p.write(id+"-key.pem", pair.Key),
		CertFile: p.write(id+".pem", pair.Cert),
		CAFile:   p.caFile, GossipKeyFile: p.gossipKeyFile, Client: p.client,
	}
}

// RotateCA appends the second CA to the CA file and makes it the issuer
// of new node certificates.
func (p *testPKI) RotateCA() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write("ca.pem", append(append([]byte{}, p.cas[0].Cert...), p.cas[1].Cert...))
	p.current = 1
}

// DropFirstCA leaves only the second CA in the CA file.
func (p *testPKI) DropFirstCA() { p.write("ca.pem", p.cas[1].Cert) }

// strangerConfig presents cert whatever the server asks for and trusts
// any server: a client that only wants to get in.
func strangerConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &cert, nil
	}}
}

// dialStream is a raft.StreamLayer that only dials, over TLS with cfg
// (nil: plain TCP): raft's own NetworkTransport speaking to a node as a
// stranger would.
type dialStream struct {
	cfg    *tls.Config
	closed chan struct{}
	once   sync.Once
}

func newDialStream(cfg *tls.Config) *dialStream {
	return &dialStream{cfg: cfg, closed: make(chan struct{})}
}

func (d *dialStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	nd := &net.Dialer{Timeout: timeout}
	if d.cfg == nil {
		return nd.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(nd, "tcp", string(addr), d.cfg)
}

func (d *dialStream) Accept() (net.Conn, error) { <-d.closed; return nil, net.ErrClosed }

func (d *dialStream) Close() error { d.once.Do(func() { close(d.closed) }); return nil }

func (d *dialStream) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// secureAdminToken is what the harness presents to a secure cluster.
const secureAdminToken = "e2e-admin-0123456789abcdef0123456789abcdef"

// secureClusterOptions start a cluster as it runs on a real network: TLS
// from a test CA, gossip encryption and named tokens with roles — the
// nodes call each other with the node token, the harness with the admin
// token.
func secureClusterOptions(t testing.TB) ClusterOptions {
	pki := newTestPKI(t)
	tokens := "# e2e\nnodes node e2e-node-0123456789abcdef0123456789abcdef\nharness admin " + secureAdminToken + "\n"
	return ClusterOptions{AdminToken: secureAdminToken, Tweak: func(cfg *ProcessConfig) {
		pki.Tweak(cfg)
		cfg.Tokens = tokens
	}}
}
