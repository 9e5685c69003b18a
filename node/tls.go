package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"fusebox/api"
	"fusebox/internal/tlsutil"
	"fusebox/raftstore"
	"fusebox/raftstore/state"
)

// tlsFiles are the node's TLS flags as tlsutil.Files.
func (c *Config) tlsFiles() tlsutil.Files {
	return tlsutil.Files{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCAFile}
}

// TLSEnabled reports whether the node serves TLS.
func (c *Config) TLSEnabled() bool { return c.tlsFiles().Set() }

// gossipKeyHint is what a refusal for want of a gossip key tells to pass.
const gossipKeyHint = "pass --gossip-key-file FILE (one base64 AES key per line, e.g. `head -c 32 /dev/urandom | base64 > gossip.key`, the same file on every node)"

// validateSecurity checks the TLS flags, requires a gossip key with TLS,
// and refuses to bind the API or Raft beyond loopback without TLS and an
// admin token, or gossip beyond loopback without its key, unless Insecure
// (as `cockroach start` refuses without --insecure). Errors name exactly
// what to pass.
func (c *Config) validateSecurity() error {
	files := c.tlsFiles()
	if err := files.Check(); err != nil {
		return err
	}
	if files.Set() && !c.hasGossipKey() {
		return errors.New("--tls-cert-file is set but --gossip-key-file is not: TLS protects the API and Raft, gossip needs its own key; " + gossipKeyHint)
	}
	if c.Insecure {
		return nil
	}
	for _, a := range []struct{ flag, addr string }{{"--http-addr", c.HTTPAddr}, {"--raft-addr", c.RaftAddr}} {
		host, _, _ := net.SplitHostPort(a.addr)
		if isLoopbackHost(host) {
			continue
		}
		var missing []string
		if !files.Set() {
			missing = append(missing, "--tls-cert-file, --tls-key-file, --tls-ca-file")
		}
		if !c.hasAdminToken() {
			missing = append(missing, "--admin-token-file")
		}
		if len(missing) == 0 {
			continue
		}
		return fmt.Errorf("%s %s is not a loopback address: beyond loopback fusebox needs TLS and an admin token; pass %s "+
			"(certificates: `fusebox tls ca create`, then `fusebox tls cert create --node ID --ip IP`), or --insecure to run without them",
			a.flag, a.addr, strings.Join(missing, " and "))
	}
	// Gossip carries membership and breaker hints: anyone who reaches an
	// unkeyed gossip port can join and open a destination's breaker on every
	// node. Beyond loopback it needs its key, as the API and Raft need TLS.
	if host, _, _ := net.SplitHostPort(c.GossipAddr); !isLoopbackHost(host) && !c.hasGossipKey() {
		return fmt.Errorf("--gossip-addr %s is not a loopback address: beyond loopback gossip needs a key, or anyone reaching it can join and send breaker hints; "+
			gossipKeyHint+", or --insecure to run without it",
			c.GossipAddr)
	}
	return nil
}

// hasGossipKey: gossip is encrypted (a key file, or keys given in process).
func (c *Config) hasGossipKey() bool { return c.GossipKeyFile != "" || len(c.GossipKeys) > 0 }

// hasAdminToken: API calls need a bearer token.
func (c *Config) hasAdminToken() bool { return c.AdminToken != "" || c.AdminTokenFile != "" }

// isLoopbackHost: "localhost" or a loopback IP. An empty host or an
// unspecified address (0.0.0.0, ::) binds every interface; any other name
// may resolve anywhere.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startTLS loads the TLS material, starts its file poller and registers
// it with Reload. Without TLS flags it does nothing.
func (n *Node) startTLS() error {
	if !n.cfg.TLSEnabled() {
		return nil
	}
	h, err := tlsutil.New(n.cfg.tlsFiles(), n.reg, n.log.With("component", "tls"))
	if err != nil {
		return err
	}
	if err := h.Watch(tlsutil.DefaultPollInterval); err != nil {
		return err
	}
	n.tls = h
	n.peerHC = &http.Client{Timeout: 30 * time.Second, Transport: h.PeerTransport()}
	n.addReloader("TLS files", h.Reload)
	return nil
}

// wrapListener serves HTTPS on ln when TLS is on.
func (n *Node) wrapListener(ln net.Listener) net.Listener {
	if n.tls == nil {
		return ln
	}
	return tls.NewListener(ln, n.tls.APIServerConfig())
}

// raftTLS is the store's TLS (a nil interface without TLS).
func (n *Node) raftTLS() raftstore.TLSConfigs {
	if n.tls == nil {
		return nil
	}
	return n.tls
}

// forwarder sends writes to the leader: over mutual TLS when TLS is on.
func (n *Node) forwarder() raftstore.Forwarder {
	f := &api.Forwarder{Tokens: n.tokens}
	if n.tls == nil {
		return f
	}
	f.Client = n.peerHC
	return httpsForwarder{f}
}

// httpsForwarder forwards to the leader's https:// address (the members'
// HTTP addresses are host:port; api.NewClient keeps an explicit
// scheme).
type httpsForwarder struct{ f *api.Forwarder }

func (h httpsForwarder) ForwardApply(ctx context.Context, leaderHTTPAddr string, cmd []byte, requestID string) (*state.ApplyResult, error) {
	if !strings.Contains(leaderHTTPAddr, "://") {
		leaderHTTPAddr = "https://" + leaderHTTPAddr
	}
	return h.f.ForwardApply(ctx, leaderHTTPAddr, cmd, requestID)
}

// peerClient reaches another node's API (?scope=cluster, the status page).
func (n *Node) peerClient(addr string) *api.Client {
	if n.tls != nil {
		return api.NewTLSClient(addr, n.tokens.Set().Outgoing(), n.peerHC)
	}
	return api.NewClient(addr, n.tokens.Set().Outgoing(), nil)
}

// closeTLS stops the poller and the peer connections. Idempotent.
func (n *Node) closeTLS() {
	if n.tls == nil {
		return
	}
	_ = n.tls.Close()
	n.peerHC.CloseIdleConnections()
}
