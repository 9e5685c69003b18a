package transporttest

import (
	"fmt"
	"net"
	"net/netip"
)

// One source refused (RefuseFrom): a firewall in front of one caller.

// RefuseFrom makes the destination reset every connection whose source IP
// is ip, as a firewall rejecting one source with a TCP reset would, while
// it serves the others as before: a new connection from ip is closed as
// soon as it is accepted, before any byte of a request is read, and the
// open connections from ip (a client's pooled keep-alive connections, a
// held ModeSlow request) are reset at once. A refused connection is no
// call: Calls and Count do not see it; RefusedConns counts it.
//
// The kernel completes the TCP handshake before the destination can look
// at the source, so the reset (the close is made with SO_LINGER 0) meets
// the client in its connect, its write of the request or its read of the
// answer, whichever it is in: a net/http client gets a *url.Error over a
// *net.OpError wrapping syscall.ECONNRESET — "dial tcp …: connect:
// connection reset by peer", "write tcp …: write: connection reset by
// peer", "read tcp …: read: connection reset by peer", the last possibly
// prefixed "readLoopPeekFailLocked: " — which transport.ConnClass calls
// ConnReset and the executor a destination failure (OutcomeDown).
//
// An IPv4-mapped IPv6 address is the IPv4 one. RefuseFrom("") refuses no
// source again; an ip that is not an IP address panics (a mistake in the
// test). It is safe for concurrent use and survives SetMode.
func (d *Destination) RefuseFrom(ip string) {
	var a *netip.Addr
	if ip != "" {
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			panic(fmt.Sprintf("transporttest: RefuseFrom(%q): not an IP address", ip))
		}
		addr = addr.Unmap().WithZone("")
		a = &addr
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refuseFrom.Store(a)
	if a == nil {
		return
	}
	for c := range d.conns {
		if d.refusedConn(c) {
			delete(d.conns, c) // StateClosed deletes it too
		}
	}
}

// RefusedConns returns how many connections RefuseFrom has reset.
func (d *Destination) RefusedConns() int { return int(d.refused.Load()) }

// refusedConn resets c and reports true when its source is RefuseFrom's.
func (d *Destination) refusedConn(c net.Conn) bool {
	a := d.refuseFrom.Load()
	if a == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil || ap.Addr().Unmap().WithZone("") != *a {
		return false
	}
	d.refused.Add(1)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends a reset, not a FIN
	}
	_ = c.Close()
	return true
}

// refusingListener is the destination's listener, with the connections
// RefuseFrom refuses reset as they are accepted: net/http never sees them.
type refusingListener struct {
	net.Listener
	d *Destination
}

func (l refusingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.d.refusedConn(c) {
			return c, err
		}
	}
}
