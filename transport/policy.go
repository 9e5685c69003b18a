package transport

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// MemberAddrs lists the host:port addresses of every cluster member's API,
// Raft and gossip listeners (node/ implements it over gossip membership:
// advertised and, for this node, bound addresses). A member bound to a
// wildcard host (0.0.0.0, ::, or an empty host) stands for its port on every
// local address; a host name is compared with URL hosts as a name and, at
// every check and dial, by the addresses it resolves to (members.go).
type MemberAddrs interface {
	MemberAddrs() []string
}

// VersionedMemberAddrs is a MemberAddrs whose list changes only with its
// version: the policy then parses the list once per version instead of at
// every check (a submit checks each callback URL; with N members that was
// 3N addresses split and parsed per task). ok false means the list cannot
// be reused yet (a node still starting).
type VersionedMemberAddrs interface {
	MemberAddrs
	MemberAddrsVersion() (version uint64, ok bool)
}

// AddressMatcher is a namespace's destination allowlist
// (dynconfig.AddressRules): whether scheme://host may be called, host being
// the URL's host[:port] in lower case.
type AddressMatcher interface {
	Allows(scheme, host string) bool
}

// DestinationError says why a destination may not be called. It never
// contains the URL's path or query.
type DestinationError struct {
	Reason string
}

func (e *DestinationError) Error() string { return "destination not allowed: " + e.Reason }

// Policy decides where outbound calls may go: the namespace's allowlist
// (Temporal's component.callbacks.allowedAddresses) and, whatever the list
// says, never to a cluster member's API, Raft or gossip address. The zero
// value allows everything. Safe for concurrent use; build it once per node.
type Policy struct {
	// Members are the addresses no call may reach; nil: none.
	Members MemberAddrs
	// Allowlist returns the allowlist configured for a namespace; set is
	// false when none is configured, and DefaultAllow decides.
	Allowlist func(namespace string) (rules AddressMatcher, set bool)
	// DefaultAllow, with no allowlist configured, allows every destination
	// (a development node on loopback) instead of none (Temporal's default).
	// A node that is not DefaultAllow also refuses, at dial, loopback,
	// link-local and multicast addresses that AllowlistPatterns does not
	// name (dialguard.go).
	DefaultAllow bool
	// AllowlistPatterns returns the Pattern of every rule of every
	// configured allowlist, the global one and every namespace's; nil
	// means none. A pattern whose host is an IP literal (127.0.0.1:9000,
	// [::1]:*) lets the dialer of a node that is not DefaultAllow connect
	// to that loopback, link-local or multicast address (dialguard.go).
	AllowlistPatterns func() []string
	// Resolver resolves URL hosts (CheckMembers) and members' host names;
	// nil means net.DefaultResolver.
	Resolver Resolver
	// ResolveTimeout bounds each DNS lookup; 0 means 2s.
	ResolveTimeout time.Duration

	members atomic.Pointer[memberSet] // parsed Members, by version

	mu       sync.Mutex
	localIPs []netip.Addr
	localAt  time.Time
	resolved map[string]resolvedHost // CheckMembers' lookups, by host (failed ones too)
	flight   singleflight.Group      // one lookup of a host at a time

	namesMu sync.Mutex
	names   map[string]resolvedHost // members' host names, resolved (members.go)
}

// Resolver resolves a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolvedHost is a cached lookup: a batch of submits to one host resolves
// it once. Safe to cache briefly: the dialer checks every real connection.
type resolvedHost struct {
	ips []netip.Addr
	at  time.Time
}

// Bounds of the lookup cache.
const (
	resolveTTL     = 5 * time.Second
	resolveEntries = 1024
)

// Allowed checks rawURL against the namespace's allowlist only (no DNS):
// the check the queue repeats before every attempt, so a changed list takes
// effect on tasks already accepted.
func (p *Policy) Allowed(namespace, rawURL string) error {
	if p == nil {
		return nil
	}
	scheme, host, ok := schemeHost(rawURL)
	if !ok {
		return &DestinationError{Reason: "not an absolute URL"}
	}
	var rules AddressMatcher
	set := false
	if p.Allowlist != nil {
		rules, set = p.Allowlist(namespace)
	}
	switch {
	case set && rules != nil && rules.Allows(scheme, host):
		return nil
	case set:
		return &DestinationError{Reason: fmt.Sprintf("%s://%s is not in component.callbacks.allowedAddresses for namespace %q (http also needs AllowInsecure)", scheme, host, namespace)}
	case !p.DefaultAllow:
		return &DestinationError{Reason: fmt.Sprintf("no component.callbacks.allowedAddresses is configured for namespace %q, and this node allows no destination by default (docs/security.md)", namespace)}
	}
	return nil
}

// schemeHost is a URL's scheme and host[:port], lower case; ok is false
// when it has no host name (http://:8470/ has none) or does not parse.
// The common form is read without url.Parse (plainOrigin: the queue checks
// every callback attempt here); FuzzSchemeHost holds the two to the same
// answer.
func schemeHost(rawURL string) (scheme, host string, ok bool) {
	if origin, plain := plainOrigin(rawURL); plain {
		i := strings.Index(origin, "://")
		return origin[:i], origin[i+len("://"):], true
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return "", "", false
	}
	return strings.ToLower(u.Scheme), strings.ToLower(u.Host), true
}

// Check is Allowed plus CheckMembers: the check of a callback at submit.
func (p *Policy) Check(ctx context.Context, namespace, rawURL string) error {
	if err := p.Allowed(namespace, rawURL); err != nil {
		return err
	}
	return p.CheckMembers(ctx, rawURL)
}

// CheckEndpoint is the check of a Nexus endpoint URL at registration: the
// global allowlist when one is configured (an operator registers
// endpoints, so the node's deny-by-default does not apply), and the member
// rule always.
func (p *Policy) CheckEndpoint(ctx context.Context, rawURL string) error {
	if p == nil {
		return nil
	}
	if p.Allowlist != nil {
		if _, set := p.Allowlist(""); set {
			if err := p.Allowed("", rawURL); err != nil {
				return err
			}
		}
	}
	return p.CheckMembers(ctx, rawURL)
}

// CheckMembers applies the member rule alone: the URL's host is compared
// with the members' host names (case-insensitively, without a trailing
// dot), then resolved, and every address it resolves to is compared with
// the members' addresses. A name that does not resolve is let through here;
// the dialer checks again with the address it really connects to. A URL
// without a host name is refused, members or not.
func (p *Policy) CheckMembers(ctx context.Context, rawURL string) error {
	if p == nil {
		return nil
	}
	host, port, derr := memberTarget(rawURL)
	if derr != nil {
		return derr
	}
	if p.Members == nil {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.checkIP(canonIP(ip), port, host)
	}
	if p.isMemberName(hostName(host), port) {
		return memberError(host, port)
	}
	for _, ip := range p.lookup(ctx, strings.ToLower(host)) {
		if err := p.checkIP(ip, port, host); err != nil {
			return err
		}
	}
	return nil
}

// memberTarget is the host name and port CheckMembers compares with the
// members: the common form read without url.Parse (plainOrigin: a
// lower-case host name or IPv4 address, an optional numeric port), any
// other through it. A URL whose host has no name (http://:8470/) is
// refused: Go would dial this host. FuzzMemberTarget holds the two to the
// same answer.
func memberTarget(rawURL string) (host string, port int, err *DestinationError) {
	if origin, plain := plainOrigin(rawURL); plain {
		i := strings.Index(origin, "://")
		scheme, hostport := origin[:i], origin[i+len("://"):]
		host, ps, _ := strings.Cut(hostport, ":")
		switch {
		case ps != "":
			n, err := strconv.Atoi(ps)
			if err != nil || n <= 0 || n > 65535 {
				return "", 0, &DestinationError{Reason: fmt.Sprintf("invalid port %q", ps)}
			}
			return host, n, nil
		case scheme == "https":
			return host, 443, nil
		default:
			return host, 80, nil
		}
	}
	u, perr := url.Parse(rawURL)
	if perr != nil || u.Host == "" {
		return "", 0, &DestinationError{Reason: "not an absolute URL"}
	}
	if u.Hostname() == "" {
		return "", 0, &DestinationError{Reason: errNoHostName}
	}
	port, perr = urlPort(u)
	if perr != nil {
		return "", 0, &DestinationError{Reason: perr.Error()}
	}
	return u.Hostname(), port, nil
}

// errNoHostName is the refusal of a URL whose host[:port] has no host
// (http://:8470/): Go dials such a URL on this host.
const errNoHostName = "the URL has no host name (a URL like http://:PORT/ connects to this host)"

// lookup resolves host (bounded by ResolveTimeout), through a small cache;
// nil when it does not resolve.
func (p *Policy) lookup(ctx context.Context, host string) []netip.Addr {
	p.mu.Lock()
	if r, ok := p.resolved[host]; ok && time.Since(r.at) < resolveTTL {
		p.mu.Unlock()
		return r.ips
	}
	p.mu.Unlock()
	// One lookup per host at a time, and a failed one is remembered too:
	// a batch of 500 tasks to a name whose DNS hangs waited out 500
	// lookups in turn (about 17 minutes); a failure lets the URL through
	// here either way, and the dialer checks the address it connects to.
	v, _, _ := p.flight.Do(host, func() (any, error) {
		ips, _ := p.resolve(ctx, host)
		p.mu.Lock()
		if len(p.resolved) >= resolveEntries {
			// Expired entries go first: wiped whole, a tenant submitting
			// to many hosts made every other tenant's next submit look
			// its host up again. Only more than resolveEntries hosts
			// within resolveTTL still empty it.
			for h, r := range p.resolved {
				if time.Since(r.at) >= resolveTTL {
					delete(p.resolved, h)
				}
			}
		}
		if p.resolved == nil || len(p.resolved) >= resolveEntries {
			p.resolved = make(map[string]resolvedHost)
		}
		p.resolved[host] = resolvedHost{ips: ips, at: time.Now()}
		p.mu.Unlock()
		return ips, nil
	})
	return v.([]netip.Addr)
}

// resolve looks host up with the policy's resolver, bounded by
// ResolveTimeout; the addresses are canonical (canonIP).
func (p *Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	to := p.ResolveTimeout
	if to <= 0 {
		to = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	var r Resolver = net.DefaultResolver
	if p.Resolver != nil {
		r = p.Resolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = canonIP(a)
	}
	return out, nil
}

func (p *Policy) checkIP(ip netip.Addr, port int, host string) error {
	if p.isMember(ip, port) {
		return memberError(host, port)
	}
	return nil
}

func memberError(host string, port int) error {
	return &DestinationError{Reason: fmt.Sprintf("%s port %d is a fusebox member's API, Raft or gossip address", host, port)}
}

func urlPort(u *url.URL) (int, error) {
	if ps := u.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n <= 0 || n > 65535 {
			return 0, fmt.Errorf("invalid port %q", ps)
		}
		return n, nil
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return 443, nil
	default:
		return 80, nil
	}
}
