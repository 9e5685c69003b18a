package cluster

import (
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
)

// packetTransport is memberlist's NetTransport for one bind address with one
// change: its UDP loop reads every packet into one reused 64 KiB buffer and
// hands memberlist a copy of the packet's bytes, where NetTransport allocates
// (and the runtime zeroes) a fresh 64 KiB buffer per packet. Gossip packets
// are tens to hundreds of bytes, so that buffer was nearly all of what a
// node allocated per received packet: with 50 nodes in one process, 21 % of
// a hint's CPU samples and most of the garbage behind its GC tail
// (cluster/DESIGN.md, "Where a hint's time goes"). Everything else — TCP
// streams, the accept back-off, the receive buffer size, the advertise
// address — is NetTransport's behaviour, kept.
type packetTransport struct {
	tcp      *net.TCPListener
	udp      *net.UDPConn
	wildcard bool // bound to every interface: advertise a private IP
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	logger   *log.Logger
	shutdown atomic.Bool
	done     chan struct{} // closed by Shutdown: a loop blocked handing over gives up
	wg       sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*packetTransport)(nil)

const (
	// udpReadBufSize is the largest UDP payload; the one read buffer is
	// this size so no packet is ever truncated.
	udpReadBufSize = 65536
	// udpSocketRecvBuf is the kernel receive buffer asked for, halved until
	// the kernel accepts it (NetTransport's udpRecvBufSize).
	udpSocketRecvBuf = 2 << 20
	// bindAttempts bounds the retries when port 0 picked a TCP port whose
	// UDP twin is taken (memberlist retries the same way).
	bindAttempts = 10
)

// newPacketTransport binds TCP and UDP on host:port (port 0: a free port,
// the same for both) and starts their read loops.
func newPacketTransport(host string, port int, logger *log.Logger) (*packetTransport, error) {
	attempts := 1
	if port == 0 {
		attempts = bindAttempts
	}
	var err error
	for range attempts {
		var t *packetTransport
		if t, err = bindPacketTransport(host, port, logger); err == nil {
			t.wg.Add(2)
			go t.tcpLoop()
			go t.udpLoop()
			return t, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return nil, err
}

func bindPacketTransport(host string, port int, logger *log.Logger) (*packetTransport, error) {
	// A name resolves to its address; NetTransport bound a name to every
	// interface (net.ParseIP gave nil) without saying so.
	ta, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("gossip bind address %q: %w", host, err)
	}
	ip := ta.IP
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, fmt.Errorf("gossip TCP listener on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	port = tcp.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		_ = tcp.Close()
		return nil, fmt.Errorf("gossip UDP listener on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	if err := setUDPRecvBuf(udp); err != nil {
		_ = tcp.Close()
		_ = udp.Close()
		return nil, fmt.Errorf("gossip UDP receive buffer: %w", err)
	}
	return &packetTransport{
		tcp:      tcp,
		udp:      udp,
		wildcard: ip == nil || ip.IsUnspecified(),
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		logger:   logger,
		done:     make(chan struct{}),
	}, nil
}

func setUDPRecvBuf(c *net.UDPConn) error {
	var err error
	for size := udpSocketRecvBuf; size > 0; size /= 2 {
		if err = c.SetReadBuffer(size); err == nil {
			return nil
		}
	}
	return err
}

// Port is the bound port (the one picked when 0 was asked for).
func (t *packetTransport) Port() int { return t.tcp.Addr().(*net.TCPAddr).Port }

// FinalAdvertiseAddr is NetTransport's: the given address, else a private
// IP when bound to every interface, else the bound IP; port 0 means the
// bound port.
func (t *packetTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if port == 0 {
		port = t.Port()
	}
	if ip != "" {
		addr := net.ParseIP(ip)
		if addr == nil {
			return nil, 0, fmt.Errorf("failed to parse advertise address %q", ip)
		}
		if ip4 := addr.To4(); ip4 != nil {
			addr = ip4
		}
		return addr, port, nil
	}
	if t.wildcard {
		priv, err := sockaddr.GetPrivateIP()
		if err != nil {
			return nil, 0, fmt.Errorf("failed to get interface addresses: %w", err)
		}
		if priv == "" {
			return nil, 0, errors.New("no private IP address found, and explicit IP not provided")
		}
		addr := net.ParseIP(priv)
		if addr == nil {
			return nil, 0, fmt.Errorf("failed to parse advertise address: %q", priv)
		}
		return addr, port, nil
	}
	return t.tcp.Addr().(*net.TCPAddr).IP, port, nil
}

func (t *packetTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *packetTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	udpAddr, err := net.ResolveUDPAddr("udp", a.Addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.udp.WriteTo(b, udpAddr)
	return time.Now(), err
}

func (t *packetTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

func (t *packetTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *packetTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", a.Addr)
}

func (t *packetTransport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown closes both sockets and waits for the read loops; idempotent.
// memberlist calls it before it stops reading the channels (as with
// NetTransport); done also frees a loop when nothing reads them at all, as
// when memberlist.Create failed after the transport was made.
func (t *packetTransport) Shutdown() error {
	if t.shutdown.Swap(true) {
		t.wg.Wait()
		return nil
	}
	close(t.done)
	_ = t.tcp.Close()
	_ = t.udp.Close()
	t.wg.Wait()
	return nil
}

// tcpLoop accepts streams, backing off 5 ms doubling to 1 s on errors (so a
// persistent error neither spins nor delays shutdown by more than 1 s).
func (t *packetTransport) tcpLoop() {
	defer t.wg.Done()
	const baseDelay, maxDelay = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		conn, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			delay = min(max(2*delay, baseDelay), maxDelay)
			t.logger.Printf("[ERR] memberlist: Error accepting TCP connection: %v", err)
			time.Sleep(delay)
			continue
		}
		delay = 0
		select {
		case t.streamCh <- conn:
		case <-t.done:
			_ = conn.Close()
			return
		}
	}
}

// udpLoop reads packets into one buffer and hands memberlist a right-sized
// copy: memberlist keeps the packet's bytes past the next read (its handler
// runs on another goroutine, and messages are queued), so the buffer itself
// is never handed out.
func (t *packetTransport) udpLoop() {
	defer t.wg.Done()
	buf := make([]byte, udpReadBufSize)
	for {
		n, addr, err := t.udp.ReadFrom(buf)
		ts := time.Now()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			t.logger.Printf("[ERR] memberlist: Error reading UDP packet: %v", err)
			continue
		}
		if n < 1 {
			t.logger.Printf("[ERR] memberlist: UDP packet too short (%d bytes) %s", n, memberlist.LogAddress(addr))
			continue
		}
		p := &memberlist.Packet{Buf: append([]byte(nil), buf[:n]...), From: addr, Timestamp: ts}
		select {
		case t.packetCh <- p:
		case <-t.done:
			return
		}
	}
}
