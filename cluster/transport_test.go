package cluster

import (
	"bytes"
	"io"
	"log"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"fusebox/internal/testwait"
)

func newTestTransport(t *testing.T) *packetTransport {
	t.Helper()
	tr, err := newPacketTransport("127.0.0.1", 0, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	return tr
}

func addrOf(tr *packetTransport) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(tr.Port()))
}

func recvPacket(t *testing.T, tr *packetTransport) *memberlist.Packet {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no packet within 10 s")
		return nil
	}
}

// Each packet handed to memberlist has its own bytes, exactly the datagram's:
// the loop's one read buffer is never handed out, so a later packet cannot
// overwrite one memberlist still holds.
func TestPacketTransportHandsOutACopyOfEachPacket(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	big := bytes.Repeat([]byte{'x'}, 1400)
	if _, err := a.WriteTo([]byte("first"), addrOf(b)); err != nil {
		t.Fatal(err)
	}
	p1 := recvPacket(t, b)
	if _, err := a.WriteToAddress(big, memberlist.Address{Addr: addrOf(b), Name: "b"}); err != nil {
		t.Fatal(err)
	}
	p2 := recvPacket(t, b)
	if string(p1.Buf) != "first" {
		t.Fatalf("first packet now reads %q: it shares the read buffer", p1.Buf)
	}
	if !bytes.Equal(p2.Buf, big) || cap(p2.Buf) > 2*len(big) {
		t.Fatalf("second packet: %d bytes (cap %d), want the 1400 sent in a right-sized buffer", len(p2.Buf), cap(p2.Buf))
	}
	if p1.From.String() != addrOf(a) || p1.Timestamp.IsZero() {
		t.Fatalf("packet from %v at %v, want %s and a read time", p1.From, p1.Timestamp, addrOf(a))
	}
}

func TestPacketTransportStreams(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	c, err := a.DialAddressTimeout(memberlist.Address{Addr: addrOf(b)}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("push-pull")); err != nil {
		t.Fatal(err)
	}
	var s net.Conn
	select {
	case s = <-b.StreamCh():
	case <-time.After(10 * time.Second):
		t.Fatal("no stream within 10 s")
	}
	defer s.Close()
	got := make([]byte, len("push-pull"))
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "push-pull" {
		t.Fatalf("stream read %q, %v", got, err)
	}
}

// Port 0 advertises the port bound; an explicit address keeps its own port.
func TestPacketTransportAdvertise(t *testing.T) {
	tr := newTestTransport(t)
	ip, port, err := tr.FinalAdvertiseAddr("", 0)
	if err != nil || !ip.Equal(net.ParseIP("127.0.0.1")) || port != tr.Port() {
		t.Fatalf("bound address: %v:%d, %v; want 127.0.0.1:%d", ip, port, err, tr.Port())
	}
	ip, port, err = tr.FinalAdvertiseAddr("10.1.2.3", 0)
	if err != nil || !ip.Equal(net.ParseIP("10.1.2.3")) || len(ip) != net.IPv4len || port != tr.Port() {
		t.Fatalf("given host: %v:%d, %v; want 10.1.2.3:%d as 4 bytes", ip, port, err, tr.Port())
	}
	if _, port, _ = tr.FinalAdvertiseAddr("10.1.2.3", 7000); port != 7000 {
		t.Fatalf("given port: %d, want 7000", port)
	}
	if _, _, err = tr.FinalAdvertiseAddr("not-an-ip", 0); err == nil {
		t.Fatal("a malformed advertise address was accepted")
	}
}

// Shutdown returns even when a packet arrived that nothing will read (as
// after a failed memberlist.Create), and again when called twice; goleak
// (TestMain) checks that both loops ended.
func TestPacketTransportShutdownWithUnreadPacket(t *testing.T) {
	a := newTestTransport(t)
	b, err := newPacketTransport("127.0.0.1", 0, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteTo([]byte("unread"), addrOf(b)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "b's read loop holding the packet", func() bool {
		buf := make([]byte, 1<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			// blocked handing the packet over: [select] here, [chan send]
			// for a loop without the done case
			if strings.Contains(g, "(*packetTransport).udpLoop") && (strings.Contains(g, "[select") || strings.Contains(g, "[chan send")) {
				return true
			}
		}
		return false
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Shutdown()
		_ = b.Shutdown()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown blocked behind a packet nobody reads")
	}
}

func TestPacketTransportResolvesNamesAndRefusesBadOnes(t *testing.T) {
	tr, err := newPacketTransport("localhost", 0, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	if ip := tr.tcp.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() || tr.wildcard {
		t.Fatalf("localhost bound %v (wildcard %v), want a loopback address", ip, tr.wildcard)
	}
	if _, err := newPacketTransport("no such host.invalid", 0, log.New(io.Discard, "", 0)); err == nil {
		t.Fatal("an unresolvable bind host was accepted")
	}
}
