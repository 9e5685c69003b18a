package node

import (
	"context"
	"net"

	"fusebox/dynconfig"
	"fusebox/transport"
)

// memberAddrs is transport.MemberAddrs over gossip membership: every known
// member's API, Raft and gossip address (dead and left members included:
// a restarted node comes back on the same ports), plus this node's own
// addresses, bound and advertised, known before gossip has started. A
// member whose API or Raft listener is bound to a wildcard address is also
// protected at its gossip host, the address other nodes reach it by.
//
// The bound addresses matter when they differ from the advertised ones:
// Raft bound to 0.0.0.0 and advertised as 10.0.0.5, or gossip bound to
// 127.0.0.1 and advertised as a NAT address, is reachable at its bound
// address (127.0.0.1:PORT), which no advertised address names; a wildcard
// bind stands for its port on every local address (transport.Policy).
type memberAddrs struct{ n *Node }

func (a memberAddrs) MemberAddrs() []string {
	n := a.n
	out := append(n.boundAddrs(), n.AdvertiseHTTPAddr(), n.RaftAddr(), n.GossipAddr())
	if n.members == nil {
		return out
	}
	for _, m := range n.members.Members() {
		out = append(out, m.GossipAddr, m.Meta.HTTPAddr, m.Meta.RaftAddr)
		gh, _, err := net.SplitHostPort(m.GossipAddr)
		if err != nil {
			continue
		}
		for _, addr := range []string{m.Meta.HTTPAddr, m.Meta.RaftAddr} {
			if h, p, err := net.SplitHostPort(addr); err == nil && isWildcard(h) {
				out = append(out, net.JoinHostPort(gh, p))
			}
		}
	}
	return out
}

// boundAddrs are the addresses this node's API, Raft and gossip listeners
// are bound to (the configured ones until a listener is up).
func (n *Node) boundAddrs() []string {
	raft, gossip := n.cfg.RaftAddr, n.cfg.GossipAddr
	if n.store != nil && n.store.RaftBoundAddr() != "" {
		raft = n.store.RaftBoundAddr()
	}
	if n.members != nil && n.members.BoundAddr() != "" {
		gossip = n.members.BoundAddr()
	}
	return []string{n.HTTPAddr(), raft, gossip}
}

// MemberAddrsVersion lets the policy reuse its parse of the addresses
// while the membership's generation stays: this node's own addresses are
// final once gossip has started (the API and Raft listeners are bound
// before it), the members' change only with a new generation.
func (a memberAddrs) MemberAddrsVersion() (uint64, bool) {
	if !a.n.gossipUp.Load() {
		return 0, false
	}
	return a.n.members.Generation(), true
}

var _ transport.VersionedMemberAddrs = memberAddrs{}

func isWildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// isLoopbackAddr reports whether a bound host:port is on a loopback address.
func isLoopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// newDestinationPolicy builds the node's transport.Policy: the allowlist
// from dynamic config (component.callbacks.allowedAddresses), members'
// addresses always refused, and the default when no list is set. A node
// whose API and Raft listeners are bound to loopback only — the development
// set-up of `make run` and `make demo` — allows every destination by
// default (members excepted); any other node allows none until a list is
// configured, Temporal's default, and dials loopback, link-local and
// multicast addresses only where a list names the IP (docs/security.md).
// The bound addresses decide, and the advertised ones too: Raft bound to
// 0.0.0.0 and advertised as 127.0.0.2 listens on every interface, and a
// loopback listener advertised as 10.0.0.5 is reached through a forwarder.
//
// TLS does not change this: a node whose API listens on loopback only takes
// tasks from processes on its own host, which can reach those destinations
// themselves; the allowlist guards a node that others can reach (put a
// list in place before exposing a loopback API through a proxy).
func (n *Node) newDestinationPolicy() *transport.Policy {
	bound := n.boundAddrs()
	return &transport.Policy{
		Members: memberAddrs{n},
		DefaultAllow: isLoopbackAddr(bound[0]) && isLoopbackAddr(bound[1]) &&
			isLoopbackAddr(n.AdvertiseHTTPAddr()) && isLoopbackAddr(n.RaftAddr()),
		Allowlist: func(ns string) (transport.AddressMatcher, bool) {
			rules, set := n.config.Current().AllowedAddresses(ns)
			return rules, set
		},
		AllowlistPatterns: func() []string { return n.config.Current().AllowedAddressPatterns() },
	}
}

// CheckDestination is transport.TaskService's destination check (Policy).
func (a *TaskAPI) CheckDestination(ctx context.Context, namespace, rawURL string, allowlist bool) error {
	if !allowlist {
		return a.Policy.CheckMembers(ctx, rawURL)
	}
	return a.Policy.Check(ctx, namespace, rawURL)
}

// CheckEndpointURL is transport.TaskService's endpoint check.
func (a *TaskAPI) CheckEndpointURL(ctx context.Context, rawURL string) error {
	return a.Policy.CheckEndpoint(ctx, rawURL)
}

// RedactHeaderNames is fusebox.redaction.headerNames for (namespace,
// destination).
func (a *TaskAPI) RedactHeaderNames(namespace, destination string) []string {
	if a.config == nil {
		return nil
	}
	return a.config.Current().RedactHeaderNames(namespace, destination)
}

var _ transport.AddressMatcher = dynconfig.AddressRules(nil)
