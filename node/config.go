// Package node assembles one fusebox node from its parts — metrics, the
// breaker pool, dynamic config, gossip membership, the Raft store, the shard
// map and the HTTP API — and starts and stops them in order. cmd/node parses
// flags into a Config; tests build many nodes in one process.
package node

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"fusebox/api"
	"fusebox/taskstore/pgstore"
)

// DefaultShards is the shard count of a cluster created with no --shards.
const DefaultShards = 16

// MaxShards bounds --shards.
const MaxShards = 16384

// Config is a node's static configuration (the serve flags).
type Config struct {
	NodeID     string
	DataDir    string
	HTTPAddr   string
	GossipAddr string
	RaftAddr   string
	// AdvertiseHTTPAddr, AdvertiseRaftAddr and AdvertiseGossipAddr
	// (--advertise-*-addr, HOST or HOST:PORT; a host alone keeps the bind
	// port) are what peers are told to dial when it is not the bound
	// address. Empty: the bound address, or for a wildcard bind the host's
	// first private IPv4 address (advertise.go).
	AdvertiseHTTPAddr   string
	AdvertiseRaftAddr   string
	AdvertiseGossipAddr string
	Join                []string
	BootstrapExpect     int
	Shards              int
	GossipKeyFile       string
	// GossipKeys, when set, are used instead of GossipKeyFile (tests).
	GossipKeys [][]byte
	// AdminTokenFile is --admin-token-file: named API tokens with roles
	// (internal/authtoken), reloaded when the file changes and by
	// Node.ReloadTokens.
	AdminTokenFile string
	// AdminToken, used when AdminTokenFile is empty, is a single admin
	// token (tests).
	AdminToken string
	// TLSCertFile, TLSKeyFile and TLSCAFile (PEM) turn on TLS for the API,
	// Raft and leader forwarding; all three or none (tls.go).
	TLSCertFile string
	TLSKeyFile  string
	TLSCAFile   string
	// Insecure allows the API or Raft beyond loopback without TLS and an
	// admin token.
	Insecure bool
	// MetricsPublic serves /metrics without a token (--metrics-public).
	MetricsPublic bool
	// HTTPLimits are the API server's timeouts and connection cap
	// (--max-conns, --http-body-timeout); zero fields take the defaults.
	HTTPLimits api.Limits
	// EnablePprof serves Go's profiles under /debug/pprof/ on the HTTP API.
	EnablePprof bool
	// Timing is "lan" (production failure detection and elections) or
	// "fast" (tight timings for tests and demos on one host).
	Timing  string
	Version string
	// Logs, optional, is the ring of recent log lines the API serves at
	// GET /v1/debug/logs (cmd/node tees its logger into it).
	Logs api.LogSource
	// RejoinEmpty (--rejoin-empty) lets a node whose data dir lost its Raft
	// log rejoin as a new member that copies the state from the leader,
	// instead of refusing to start (raftstore.Config.RejoinEmpty).
	RejoinEmpty bool
	// TaskStore is --task-store: "raft" (the default, also when empty:
	// tasks in the replicated Raft state) or "postgres" (tasks, attempts,
	// results and the DLQ in PostgreSQL at PostgresURL; Raft keeps the
	// control plane).
	TaskStore string
	// PostgresURL is --postgres-url (or FUSEBOX_POSTGRES_URL), a
	// postgres:// URL; its password is a secret: never logged, redacted
	// by Redacted and in every error (pgstore.RedactURL).
	PostgresURL string
	// OutboundSourceAddr is --outbound-source-addr: the local IP outbound
	// calls to destinations leave from (tasks and health checks alike),
	// for hosts with several addresses; empty: the kernel chooses
	// (transport.Options.LocalAddr). Node-to-node traffic is not affected.
	OutboundSourceAddr string
}

// Redacted is c with its secrets hidden, for logs and dumps.
func (c Config) Redacted() Config {
	if c.PostgresURL != "" {
		c.PostgresURL = pgstore.RedactURL(c.PostgresURL)
	}
	if c.AdminToken != "" {
		c.AdminToken = "xxxxx"
	}
	c.GossipKeys = nil
	return c
}

// UsesPostgres reports whether tasks live in PostgreSQL.
func (c *Config) UsesPostgres() bool { return c.TaskStore == TaskStorePostgres }

func (c *Config) validateTaskStore() error {
	switch c.TaskStore {
	case "", TaskStoreRaft:
		if c.PostgresURL != "" {
			return fmt.Errorf("--postgres-url: set, but --task-store is raft (want --task-store postgres, or unset FUSEBOX_POSTGRES_URL)")
		}
	case TaskStorePostgres:
		if c.PostgresURL == "" {
			return fmt.Errorf("--postgres-url: required with --task-store postgres (postgres://user:password@host:5432/db; prefer FUSEBOX_POSTGRES_URL, so the password is not on the command line)")
		}
		u, err := url.Parse(c.PostgresURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return fmt.Errorf("--postgres-url %s: want postgres://[user[:password]@]host[:port]/database", pgstore.RedactURL(c.PostgresURL))
		}
		if _, err := pgxpool.ParseConfig(c.PostgresURL); err != nil {
			return fmt.Errorf("--postgres-url %s: not a valid PostgreSQL connection URL: %s", pgstore.RedactURL(c.PostgresURL), pgParseReason(err, u))
		}
	default:
		return fmt.Errorf("--task-store %q: want raft or postgres", c.TaskStore)
	}
	return nil
}

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Validate names the first bad field, using the flag's name.
func (c *Config) Validate() error {
	if !nodeIDRe.MatchString(c.NodeID) {
		return fmt.Errorf("--node-id %q: want 1–128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", c.NodeID)
	}
	if c.DataDir == "" {
		return fmt.Errorf("--data-dir: must not be empty")
	}
	for flag, addr := range map[string]string{"--http-addr": c.HTTPAddr, "--gossip-addr": c.GossipAddr, "--raft-addr": c.RaftAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: want host:port: %v", flag, addr, err)
		}
	}
	for _, j := range c.Join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			return fmt.Errorf("--join %q: want host:port: %v", j, err)
		}
	}
	if c.BootstrapExpect < 0 {
		return fmt.Errorf("--bootstrap-expect %d: must not be negative", c.BootstrapExpect)
	}
	if c.Shards < 1 || c.Shards > MaxShards {
		return fmt.Errorf("--shards %d: must be between 1 and %d", c.Shards, MaxShards)
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.HTTPLimits.MaxConns < 0 {
		return fmt.Errorf("--max-conns %d: must not be negative", c.HTTPLimits.MaxConns)
	}
	if c.HTTPLimits.BodyTimeout < 0 {
		return fmt.Errorf("--http-body-timeout %v: must not be negative", c.HTTPLimits.BodyTimeout)
	}
	if err := c.validateTaskStore(); err != nil {
		return err
	}
	if err := c.validateOutboundSource(); err != nil {
		return err
	}
	switch c.Timing {
	case "lan", "fast":
	default:
		return fmt.Errorf("--timing %q: want lan or fast", c.Timing)
	}
	return nil
}

// validateOutboundSource checks --outbound-source-addr: an IP address this
// host can bind (checked by binding it, port 0, at once: a typo found only
// at the first call would fail every call). transport.New checks the same.
func (c *Config) validateOutboundSource() error {
	if c.OutboundSourceAddr == "" {
		return nil
	}
	ip, err := netip.ParseAddr(c.OutboundSourceAddr)
	if err != nil {
		return fmt.Errorf("--outbound-source-addr %q: not an IP address (want the local IP outbound calls leave from, such as 10.0.0.5, without a port; empty lets the kernel choose)", c.OutboundSourceAddr)
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), 0)))
	if err != nil {
		return fmt.Errorf("--outbound-source-addr %q: not an address of this host: %v", c.OutboundSourceAddr, err)
	}
	_ = ln.Close()
	return nil
}

// pgParseReason is why pgx refused a connection URL, without the URL: its
// error quotes the connection string with the password redacted only "best
// effort" (pgconn.ParseConfigError), so the quote is cut and the password,
// if any, is blanked wherever it still appears. Without a reason, a bad
// port, sslmode or pool_max_conns all read "not a valid … URL".
func pgParseReason(err error, u *url.URL) string {
	msg := err.Error()
	if i := strings.Index(msg, "`: "); i >= 0 && strings.HasPrefix(msg, "cannot parse `") {
		msg = msg[i+len("`: "):]
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "<redacted>")
	}
	return msg
}
