package node

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"fusebox/cluster"
)

// advertised holds the addresses this node tells its peers, one per
// listener (--advertise-{http,raft,gossip}-addr). An empty field means
// "the bound address". A port of 0 means "the port the listener got" (a
// bind to port 0, or an advertise flag given as a host alone).
type advertised struct {
	http, raft, gossip string
}

// resolveAdvertise decides what each listener advertises. pick returns the
// host's address for wildcard binds (hostPrivateIPv4 outside tests).
func (c *Config) resolveAdvertise(pick func() (net.IP, error)) (advertised, error) {
	var a advertised
	var err error
	if a.http, err = advertiseAddr("--http-addr", c.HTTPAddr, "--advertise-http-addr", c.AdvertiseHTTPAddr, pick); err != nil {
		return a, err
	}
	if a.raft, err = advertiseAddr("--raft-addr", c.RaftAddr, "--advertise-raft-addr", c.AdvertiseRaftAddr, pick); err != nil {
		return a, err
	}
	if a.gossip, err = advertiseAddr("--gossip-addr", c.GossipAddr, "--advertise-gossip-addr", c.AdvertiseGossipAddr, pick); err != nil {
		return a, err
	}
	return a, nil
}

// advertiseAddr returns the address to advertise for one listener: adv
// (HOST or HOST:PORT; a host alone takes the bind port), else for a
// wildcard bind (0.0.0.0, ::, empty host) the host's address from pick,
// else "" (advertise the bound address). A wildcard bind with no address to
// pick is refused, naming the flag to set, as Consul refuses.
func advertiseAddr(bindFlag, bind, advFlag, adv string, pick func() (net.IP, error)) (string, error) {
	bhost, bport, err := net.SplitHostPort(bind)
	if err != nil {
		return "", fmt.Errorf("%s %q: want host:port: %v", bindFlag, bind, err)
	}
	if adv != "" {
		host, port, err := splitAdvertise(adv)
		if err != nil {
			return "", fmt.Errorf("%s %q: %v", advFlag, adv, err)
		}
		if port == "" {
			port = bport
		}
		return net.JoinHostPort(host, port), nil
	}
	if !isWildcard(bhost) {
		return "", nil
	}
	ip, err := pick()
	if err != nil {
		return "", fmt.Errorf("%s %s binds every interface and no address to advertise to peers was found (%v); set %s HOST[:PORT] to the address peers reach this node on",
			bindFlag, bind, err, advFlag)
	}
	return net.JoinHostPort(ip.String(), bport), nil
}

// splitAdvertise parses HOST or HOST:PORT ([v6] or [v6]:PORT). The host
// must be a concrete address or name: a wildcard cannot be dialled.
func splitAdvertise(s string) (host, port string, err error) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", "", fmt.Errorf("port %q: want 1-65535", p)
		}
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	}
	if host == "" || strings.ContainsAny(host, " /:") && net.ParseIP(host) == nil {
		return "", "", errors.New("want HOST or HOST:PORT, with an IP address or a DNS name peers can resolve")
	}
	if isWildcard(host) {
		return "", "", errors.New("a wildcard address (0.0.0.0, ::) cannot be advertised: peers need the address they can reach this node on")
	}
	// Peers refuse gossiped addresses that are not plain host:port
	// (cluster.CheckHostPort): refuse them here first.
	if err := cluster.CheckHostPort(net.JoinHostPort(host, cmp.Or(port, "1"))); err != nil {
		return "", "", fmt.Errorf("want HOST or HOST:PORT, with an IP address or a DNS name peers can resolve: %v", err)
	}
	return host, port, nil
}

// ifaceAddrs is one network interface as hostPrivateIPv4 sees it.
type ifaceAddrs struct {
	up, loopback bool
	addrs        []net.Addr
}

// hostPrivateIPv4 is the first private (RFC 1918) IPv4 address of an up,
// non-loopback interface, in the order the system lists them, as Consul and
// memberlist (go-sockaddr's GetPrivateIP) pick the advertise address of a
// wildcard bind.
func hostPrivateIPv4() (net.IP, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	var list []ifaceAddrs
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		list = append(list, ifaceAddrs{up: i.Flags&net.FlagUp != 0, loopback: i.Flags&net.FlagLoopback != 0, addrs: addrs})
	}
	return pickPrivateIPv4(list)
}

func pickPrivateIPv4(ifs []ifaceAddrs) (net.IP, error) {
	for _, i := range ifs {
		if !i.up || i.loopback {
			continue
		}
		for _, a := range i.addrs {
			var ip net.IP
			switch v := a.(type) {
			case *net.IPNet:
				ip = v.IP
			case *net.IPAddr:
				ip = v.IP
			}
			if ip4 := ip.To4(); ip4 != nil && ip4.IsPrivate() {
				return ip4, nil
			}
		}
	}
	return nil, errors.New("this host has no private IPv4 address on an up, non-loopback interface")
}

// withPort replaces a port of 0 in addr (host:port) by the port of bound.
func withPort(addr, bound string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || p != "0" {
		return addr
	}
	_, bp, err := net.SplitHostPort(bound)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(h, bp)
}
