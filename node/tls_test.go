package node

import (
	"strings"
	"testing"
)

func TestValidateLoopbackRule(t *testing.T) {
	base := func() Config {
		return Config{NodeID: "n1", DataDir: "d", HTTPAddr: "127.0.0.1:8470", GossipAddr: "127.0.0.1:8471", RaftAddr: "127.0.0.1:8472", Shards: 16, Timing: "lan"}
	}
	withTLS := func(c Config) Config {
		c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile, c.GossipKeyFile = "c.pem", "k.pem", "ca.pem", "g.key"
		return c
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" = valid
	}{
		{"loopback, nothing", func(*Config) {}, ""},
		{"localhost", func(c *Config) { c.HTTPAddr = "localhost:8470"; c.RaftAddr = "[::1]:8472" }, ""},
		{"all interfaces, nothing", func(c *Config) { c.HTTPAddr = "0.0.0.0:8470" },
			"--http-addr 0.0.0.0:8470 is not a loopback address: beyond loopback fusebox needs TLS and an admin token; pass --tls-cert-file, --tls-key-file, --tls-ca-file and --admin-token-file"},
		{"empty host", func(c *Config) { c.HTTPAddr = ":8470" }, "--http-addr :8470 is not a loopback address"},
		{"ipv6 any raft", func(c *Config) { c.RaftAddr = "[::]:8472" }, "--raft-addr [::]:8472 is not a loopback address"},
		{"LAN IP, token only", func(c *Config) { c.RaftAddr = "10.0.0.1:8472"; c.AdminToken = "t" },
			"pass --tls-cert-file, --tls-key-file, --tls-ca-file (certificates"},
		{"LAN IP, TLS only", func(c *Config) { *c = withTLS(*c); c.HTTPAddr = "10.0.0.1:8470" }, "pass --admin-token-file (certificates"},
		{"LAN IP, TLS and token", func(c *Config) { *c = withTLS(*c); c.HTTPAddr = "10.0.0.1:8470"; c.AdminToken = "t" }, ""},
		{"a host name", func(c *Config) { c.HTTPAddr = "node1.example:8470" }, "--http-addr node1.example:8470 is not a loopback address"},
		{"--insecure", func(c *Config) { c.HTTPAddr = "0.0.0.0:8470"; c.RaftAddr = "10.0.0.1:8472"; c.Insecure = true }, ""},
		{"TLS without gossip key", func(c *Config) { *c = withTLS(*c); c.GossipKeyFile = "" }, "pass --gossip-key-file FILE"},
		{"TLS with in-process gossip keys", func(c *Config) { *c = withTLS(*c); c.GossipKeyFile = ""; c.GossipKeys = [][]byte{make([]byte, 32)} }, ""},
		{"TLS half configured", func(c *Config) { c.TLSCertFile = "c.pem" }, "--tls-key-file is missing"},
		{"gossip beyond loopback without a key", func(c *Config) { c.GossipAddr = "0.0.0.0:8471" },
			"--gossip-addr 0.0.0.0:8471 is not a loopback address: beyond loopback gossip needs a key"},
		{"gossip on a host name without a key", func(c *Config) { c.GossipAddr = "node1.example:8471" }, "pass --gossip-key-file FILE"},
		{"gossip beyond loopback with a key", func(c *Config) { c.GossipAddr = "10.0.0.1:8471"; c.GossipKeyFile = "g.key" }, ""},
		{"gossip beyond loopback, --insecure", func(c *Config) { c.GossipAddr = "0.0.0.0:8471"; c.Insecure = true }, ""},
		{"gossip on localhost", func(c *Config) { c.GossipAddr = "localhost:8471" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
