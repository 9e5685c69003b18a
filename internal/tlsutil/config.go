package tlsutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"
)

// MinVersion is the oldest protocol any fusebox endpoint speaks.
const MinVersion = tls.VersionTLS12

// RaftServerConfig is the Raft listener's config: mutual TLS. The peer
// must present a node certificate (server and client auth) that chains to
// the CA bundle in force at the handshake; a CLI client certificate (client
// auth only) is refused, as is one from another CA or an expired one.
func (h *Holder) RaftServerConfig() *tls.Config {
	return h.serverConfig(tls.RequireAndVerifyClientCert, true)
}

// APIServerConfig is the HTTP API's config: a client certificate is
// optional (bearer tokens authenticate API calls) but, when one is
// presented, it must chain to the CA bundle and be valid now.
func (h *Holder) APIServerConfig() *tls.Config {
	return h.serverConfig(tls.VerifyClientCertIfGiven, false)
}

// serverConfig returns a config whose GetConfigForClient reads the current
// material at each handshake, so a reload applies to the next connection.
func (h *Holder) serverConfig(auth tls.ClientAuthType, nodeOnly bool) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := h.Current()
			c := &tls.Config{
				MinVersion:   MinVersion,
				Certificates: []tls.Certificate{m.Cert},
				ClientCAs:    m.CAs,
				ClientAuth:   auth,
				// No resumption: every connection is verified against the
				// CA bundle in force now (a CA removed by a reload cannot
				// come back through an old ticket).
				SessionTicketsDisabled: true,
			}
			if nodeOnly {
				c.VerifyConnection = requireNodeCert
			}
			return c, nil
		},
	}
}

// PeerClientConfig is the config one node-to-node connection (Raft, leader
// forwarding, peer API calls) dials with, built from the current material:
// it presents this node's certificate and accepts a server whose
// certificate chains to the CA bundle and is a node certificate. Peers are
// addressed by IP:port from gossip, so no host name is checked (see
// DESIGN.md). Build one per dial so reloads apply.
func (h *Holder) PeerClientConfig() *tls.Config {
	m := h.Current()
	return &tls.Config{
		MinVersion:   MinVersion,
		Certificates: []tls.Certificate{m.Cert},
		// Verification is done in VerifyConnection, against m.CAs, without
		// a host name; InsecureSkipVerify only turns off the built-in check
		// that would require one.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := verifyChain(cs, m.CAs, x509.ExtKeyUsageServerAuth); err != nil {
				return err
			}
			return requireNodeCert(cs)
		},
	}
}

// verifyChain checks the peer's chain against roots for the given usage.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("tls: peer certificate %q: %w", cs.PeerCertificates[0].Subject.CommonName, err)
	}
	return nil
}

// requireNodeCert accepts only node certificates: both server and client
// auth, as `fusebox tls cert create --node` makes them.
func requireNodeCert(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: peer presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return fmt.Errorf("tls: peer certificate %q is not a node certificate (needs server and client auth)", leaf.Subject.CommonName)
	}
	return nil
}

// DialPeer dials addr and completes a mutual-TLS handshake with the
// current material within ctx.
func (h *Holder) DialPeer(ctx context.Context, d *net.Dialer, network, addr string) (*tls.Conn, error) {
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, h.PeerClientConfig())
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	return c, nil
}

// ErrPlainPeer is PeerTransport's answer to an http:// peer address.
var ErrPlainPeer = errors.New("tlsutil: plain-text peer call")

// PeerTransport is an http.Transport for node-to-node API calls (leader
// forwarding, ?scope=cluster, the status page): every new connection
// dials with PeerClientConfig, so one long-lived transport follows
// reloads, and an http:// address is refused before any dial (ErrPlainPeer).
// Pool sizes match transport's shared client.
func (h *Holder) PeerTransport() *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return h.DialPeer(ctx, d, network, addr)
		},
		// Peer calls carry the cluster's token: never in clear, whatever
		// scheme an address came with (no proxy either: Proxy is nil).
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
			return nil, fmt.Errorf("%w: plain-text connection to peer %s refused: TLS is on", ErrPlainPeer, addr)
		},
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// ClientFiles are what a CLI (or any API client) uses: the CA bundle to
// verify the node, and optionally a client certificate and key.
type ClientFiles struct {
	CAFile   string // --ca-file / FUSEBOX_CACERT
	CertFile string // --client-cert / FUSEBOX_CLIENT_CERT
	KeyFile  string // --client-key / FUSEBOX_CLIENT_KEY
}

// ClientConfig builds a client config that verifies the node's certificate
// against the CA file and the host name dialled (node certificates carry
// 127.0.0.1 and localhost by default), presenting the client certificate
// when one is given. An empty CAFile uses the system roots.
func ClientConfig(f ClientFiles) (*tls.Config, error) {
	c := &tls.Config{MinVersion: MinVersion}
	if f.CAFile != "" {
		_, pool, err := loadCAs("--ca-file", f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--client-cert %s / --client-key %s: %w", f.CertFile, f.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case f.CertFile != "":
		return nil, errors.New("--client-cert is set but --client-key is not: pass both")
	case f.KeyFile != "":
		return nil, errors.New("--client-key is set but --client-cert is not: pass both")
	}
	return c, nil
}
