package transport

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MemberAddrs lists the host:port addresses of every cluster member's API,
// Raft and gossip listeners (node/ implements it over gossip membership). A
// member bound to a wildcard host (0.0.0.0, ::, or an empty host) stands for
// its port on every local address.
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
	DefaultAllow bool
	// ResolveTimeout bounds the DNS lookup of Check; 0 means 2s.
	ResolveTimeout time.Duration

	members atomic.Pointer[memberSet] // parsed Members, by version

	mu       sync.Mutex
	localIPs []net.IP
	localAt  time.Time
	resolved map[string]resolvedHost // CheckMembers' lookups, by host
}

// resolvedHost is a cached lookup: a batch of submits to one host resolves
// it once. Safe to cache briefly: the dialer checks every real connection.
type resolvedHost struct {
	ips []net.IP
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
// when it has no host or does not parse. The common form is read without
// url.Parse (plainOrigin: the queue checks every callback attempt here);
// FuzzSchemeHost holds the two to the same answer.
func schemeHost(rawURL string) (scheme, host string, ok bool) {
	if origin, plain := plainOrigin(rawURL); plain {
		i := strings.Index(origin, "://")
		return origin[:i], origin[i+len("://"):], true
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
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

// CheckMembers applies the member rule alone: the URL's host is resolved
// and every address it resolves to is compared with the members'
// addresses. A name that does not resolve is let through here; the dialer
// checks again with the address it really connects to.
func (p *Policy) CheckMembers(ctx context.Context, rawURL string) error {
	if p == nil || p.Members == nil {
		return nil
	}
	host, port, derr := memberTarget(rawURL)
	if derr != nil {
		return derr
	}
	if ip := net.ParseIP(host); ip != nil {
		return p.checkIP(ip, port, host)
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
// other through it. FuzzMemberTarget holds the two to the same answer.
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
	port, perr = urlPort(u)
	if perr != nil {
		return "", 0, &DestinationError{Reason: perr.Error()}
	}
	return u.Hostname(), port, nil
}

// lookup resolves host (bounded by ResolveTimeout), through a small cache;
// nil when it does not resolve.
func (p *Policy) lookup(ctx context.Context, host string) []net.IP {
	p.mu.Lock()
	if r, ok := p.resolved[host]; ok && time.Since(r.at) < resolveTTL {
		p.mu.Unlock()
		return r.ips
	}
	p.mu.Unlock()
	to := p.ResolveTimeout
	if to <= 0 {
		to = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil
	}
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = a.IP
	}
	p.mu.Lock()
	if p.resolved == nil || len(p.resolved) >= resolveEntries {
		p.resolved = make(map[string]resolvedHost)
	}
	p.resolved[host] = resolvedHost{ips: ips, at: time.Now()}
	p.mu.Unlock()
	return ips
}

func (p *Policy) checkIP(ip net.IP, port int, host string) error {
	if p.isMember(ip, port) {
		return &DestinationError{Reason: fmt.Sprintf("%s port %d is a fusebox member's API, Raft or gossip address", host, port)}
	}
	return nil
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

// DialControl is a net.Dialer Control: it runs after DNS resolution with
// the IP:port being connected to, so a name that resolves (or re-resolves:
// DNS rebinding) to a member is refused too. The error is a
// *DestinationError, classified "blocked".
func (p *Policy) DialControl(network, address string, _ syscall.RawConn) error {
	if p == nil || p.Members == nil {
		return nil
	}
	host, ps, err := net.SplitHostPort(address)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	port, _ := strconv.Atoi(ps)
	if ip != nil && p.isMember(ip, port) {
		return &DestinationError{Reason: fmt.Sprintf("%s is a fusebox member's API, Raft or gossip address", address)}
	}
	return nil
}

// memberAddr is one member listener's address, parsed.
type memberAddr struct {
	port int
	host string // zone removed; "" for a wildcard bind
	ip   net.IP // nil when host is a name
}

// memberSet is Members parsed at one version.
type memberSet struct {
	version uint64
	addrs   []memberAddr
}

// memberAddrs returns Members parsed, reusing the last parse while a
// VersionedMemberAddrs keeps its version. The version is read before the
// list, so a list newer than its version is parsed again, never kept.
func (p *Policy) memberAddrs() []memberAddr {
	vm, versioned := p.Members.(VersionedMemberAddrs)
	var v uint64
	if versioned {
		v, versioned = vm.MemberAddrsVersion()
	}
	if versioned {
		if s := p.members.Load(); s != nil && s.version == v {
			return s.addrs
		}
	}
	var out []memberAddr
	for _, a := range p.Members.MemberAddrs() {
		h, ps, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		mp, err := strconv.Atoi(ps)
		if err != nil {
			continue
		}
		if i := strings.IndexByte(h, '%'); i >= 0 {
			h = h[:i]
		}
		out = append(out, memberAddr{port: mp, host: h, ip: net.ParseIP(h)})
	}
	if versioned {
		p.members.Store(&memberSet{version: v, addrs: out})
	}
	return out
}

// isMember reports whether ip:port is a member's listener.
func (p *Policy) isMember(ip net.IP, port int) bool {
	for _, m := range p.memberAddrs() {
		if m.port != port {
			continue
		}
		switch {
		case ip.IsUnspecified():
			// Connecting to 0.0.0.0 or :: reaches this host, whatever
			// address the member is bound to: refuse the port outright.
			return true
		case m.host == "" || (m.ip != nil && m.ip.IsUnspecified()):
			if p.isLocal(ip) {
				return true
			}
		case m.host == "localhost":
			if ip.IsLoopback() {
				return true
			}
		case m.ip != nil && m.ip.Equal(ip):
			return true
		}
	}
	return false
}

// isLocal reports whether ip is an address of this host: loopback,
// unspecified (which connects to the local host), or an interface address
// (cached for a few seconds).
func (p *Policy) isLocal(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.localIPs == nil || time.Since(p.localAt) > 10*time.Second {
		p.localIPs = make([]net.IP, 0, 8)
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					p.localIPs = append(p.localIPs, n.IP)
				}
			}
		}
		p.localAt = time.Now()
	}
	for _, l := range p.localIPs {
		if l.Equal(ip) {
			return true
		}
	}
	return false
}
