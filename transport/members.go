package transport

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memberAddr is one member listener's address, parsed.
type memberAddr struct {
	port int
	host string     // hostName form (lower case, no zone, no trailing dot); "" for a wildcard bind
	ip   netip.Addr // canonIP; invalid when host is a name
}

// memberSet is Members parsed at one version.
type memberSet struct {
	version uint64
	addrs   []memberAddr
}

// Bounds of the cache of members' host names (memberNameIPs): a name is
// resolved again at most every memberNameTTL, and at most memberNames
// names are kept (more empty the cache, which then refills).
const (
	memberNameTTL = 5 * time.Second
	memberNames   = 256
)

// canonIP is ip as the member rule compares it: without a zone (a dial to
// [::1%lo] reaches ::1), IPv4-mapped addresses as IPv4.
func canonIP(ip netip.Addr) netip.Addr { return ip.WithZone("").Unmap() }

// hostName is a host name as the member rule compares it: lower case,
// without its trailing dot (LOCALHOST. is localhost).
func hostName(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

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
		m := memberAddr{port: mp}
		if ip, err := netip.ParseAddr(h); err == nil {
			m.ip = canonIP(ip)
			m.host = m.ip.String()
		} else {
			if i := strings.IndexByte(h, '%'); i >= 0 {
				h = h[:i]
			}
			m.host = hostName(h)
		}
		out = append(out, m)
	}
	if versioned {
		p.members.Store(&memberSet{version: v, addrs: out})
	}
	return out
}

// isMember reports whether ip (canonIP) :port is a member's listener.
func (p *Policy) isMember(ip netip.Addr, port int) bool {
	var names []string
	for _, m := range p.memberAddrs() {
		if m.port != port {
			continue
		}
		switch {
		case ip.IsUnspecified():
			// Connecting to 0.0.0.0 or :: reaches this host, whatever
			// address the member is bound to: refuse the port outright.
			return true
		case m.host == "" || m.ip.IsUnspecified():
			if p.isLocal(ip) {
				return true
			}
		case m.host == "localhost":
			if ip.IsLoopback() {
				return true
			}
		case m.ip.IsValid():
			if m.ip == ip {
				return true
			}
		default:
			names = append(names, m.host)
		}
	}
	if len(names) == 0 {
		return false
	}
	for _, ips := range p.memberNameIPs(names) {
		if slices.Contains(ips, ip) {
			return true
		}
	}
	return false
}

// isMemberName reports whether a URL's host name (hostName form) is a
// member's host name on port, or names this host on a wildcard-bound
// member's port.
func (p *Policy) isMemberName(name string, port int) bool {
	for _, m := range p.memberAddrs() {
		if m.port != port {
			continue
		}
		if !m.ip.IsValid() && m.host != "" && m.host == name {
			return true
		}
		if (m.host == "" || m.ip.IsUnspecified() || m.host == "localhost") && name == "localhost" {
			return true
		}
	}
	return false
}

// memberNameIPs returns what members' host names resolve to, so the
// dialer, which sees only addresses, refuses them too. A name is resolved
// again at most every memberNameTTL; the stale ones are looked up
// together, so a check waits at most ResolveTimeout however many there are,
// and concurrent checks share each lookup.
// A failed lookup keeps the addresses found before (and is not retried
// before the TTL either).
func (p *Policy) memberNameIPs(names []string) [][]netip.Addr {
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([][]netip.Addr, len(names))
	now := time.Now()
	var stale []int
	p.namesMu.Lock()
	for i, n := range names {
		r, ok := p.names[n]
		out[i] = r.ips
		if !ok || now.Sub(r.at) >= memberNameTTL {
			stale = append(stale, i)
		}
	}
	p.namesMu.Unlock()
	if len(stale) == 0 {
		return out
	}
	var wg sync.WaitGroup
	for _, i := range stale {
		wg.Go(func() {
			// One lookup of a name at a time: concurrent checks share it.
			v, err, _ := p.flight.Do("member\x00"+names[i], func() (any, error) {
				return p.resolve(context.Background(), names[i])
			})
			if ips, ok := v.([]netip.Addr); err == nil && ok {
				out[i] = ips
			}
		})
	}
	wg.Wait()
	p.namesMu.Lock()
	if p.names == nil || len(p.names)+len(stale) > memberNames {
		p.names = make(map[string]resolvedHost, len(stale))
	}
	for _, i := range stale {
		p.names[names[i]] = resolvedHost{ips: out[i], at: now}
	}
	p.namesMu.Unlock()
	return out
}

// isLocal reports whether ip is an address of this host: loopback,
// unspecified (which connects to the local host), or an interface address
// (cached for a few seconds).
func (p *Policy) isLocal(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.localIPs == nil || time.Since(p.localAt) > 10*time.Second {
		p.localIPs = make([]netip.Addr, 0, 8)
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(n.IP); ok {
						p.localIPs = append(p.localIPs, canonIP(ip))
					}
				}
			}
		}
		p.localAt = time.Now()
	}
	return slices.Contains(p.localIPs, ip)
}
