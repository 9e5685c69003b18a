package transport

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// DialControl is a net.Dialer Control: it runs after DNS resolution with
// the IP:port being connected to, so what a name resolves (or re-resolves:
// DNS rebinding) to is judged, not the name. It fails closed, with a
// *DestinationError (classified "blocked", like every refusal of the
// policy), on:
//
//   - an address that is not an IP:port, or an unspecified one (0.0.0.0/8,
//     ::), which connects to this host: Go dials http://:8470/ as ":8470";
//   - a member's API, Raft or gossip address (zones ignored: [::1%lo] is
//     ::1; IPv4-mapped addresses as IPv4);
//   - on a node that is not DefaultAllow, a loopback (127.0.0.0/8, ::1),
//     link-local (169.254.0.0/16 — cloud metadata —, fe80::/10) or
//     multicast address, unless an allowlist pattern names that IP as a
//     literal (allowsSpecial). Private ranges (10/8, 172.16/12,
//     192.168/16, fc00::/7) are not refused: internal services are normal
//     destinations, and the allowlist decides which names may be called.
func (p *Policy) DialControl(network, address string, _ syscall.RawConn) error {
	if p == nil {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DestinationError{Reason: fmt.Sprintf("dial address %q is not an IP:port", address)}
	}
	ip, port := canonIP(ap.Addr()), int(ap.Port())
	if ip.IsUnspecified() || (ip.Is4() && ip.As4()[0] == 0) {
		return &DestinationError{Reason: fmt.Sprintf("dial address %s is unspecified (0.0.0.0/8 or ::), which connects to this host", address)}
	}
	if p.Members != nil && p.isMember(ip, port) {
		return &DestinationError{Reason: fmt.Sprintf("%s is a fusebox member's API, Raft or gossip address", address)}
	}
	if p.DefaultAllow {
		return nil
	}
	if class := specialClass(ip); class != "" && !p.allowsSpecial(ip, port) {
		return &DestinationError{Reason: fmt.Sprintf("%s is a %s address, which this node dials only when component.callbacks.allowedAddresses names the IP itself (docs/security.md)", address, class)}
	}
	return nil
}

// specialClass names the ranges a node that is not DefaultAllow refuses at
// dial (ip is canonIP), or "".
func specialClass(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast():
		return "multicast"
	}
	return ""
}

// allowsSpecial reports whether an allowlist pattern opens ip:port: its
// host is that IP as a literal, without '*' (127.0.0.1, [::1],
// 169.254.169.254), and its port matches — a pattern without a port (which
// matches URLs without one) opens 80 and 443, "*" any port. A glob host
// (127.0.0.*, *) or a name (localhost) opens nothing: an operator who
// means to call a loopback or metadata address writes it.
func (p *Policy) allowsSpecial(ip netip.Addr, port int) bool {
	if p.AllowlistPatterns == nil {
		return false
	}
	for _, pat := range p.AllowlistPatterns() {
		if literalOpens(pat, ip, port) {
			return true
		}
	}
	return false
}

// literalOpens reports whether one pattern (host[:port] glob, as the
// allowlist holds it) is ip as a literal, with a port glob matching port.
func literalOpens(pattern string, ip netip.Addr, port int) bool {
	var host, ports string
	hasPort := false
	if rest, ok := strings.CutPrefix(pattern, "["); ok {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return false
		}
		host, rest = rest[:end], rest[end+1:]
		if rest != "" {
			if ports, hasPort = strings.CutPrefix(rest, ":"); !hasPort {
				return false
			}
		}
	} else {
		// An unbracketed IPv6 address matches no URL host[:port]: its
		// first colon ends the host here, which then is no IP.
		host, ports, hasPort = strings.Cut(pattern, ":")
	}
	if strings.IndexByte(host, '*') >= 0 {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil || canonIP(a) != ip {
		return false
	}
	if !hasPort || ports == "" {
		return port == 80 || port == 443
	}
	if strings.IndexByte(ports, '*') < 0 {
		n, err := strconv.Atoi(ports)
		return err == nil && n == port
	}
	return globMatch(ports, strconv.Itoa(port))
}

// globMatch reports whether s matches pattern, where '*' matches any run
// of characters and everything else itself.
func globMatch(pattern, s string) bool {
	star, next := -1, 0 // the last '*' seen in pattern, and where in s its run ends
	pi, si := 0, 0
	for si < len(s) {
		switch {
		case pi < len(pattern) && pattern[pi] == '*':
			star, next = pi, si
			pi++
		case pi < len(pattern) && pattern[pi] == s[si]:
			pi++
			si++
		case star >= 0:
			next++
			pi, si = star+1, next
		default:
			return false
		}
	}
	for pi < len(pattern) && pattern[pi] == '*' {
		pi++
	}
	return pi == len(pattern)
}
