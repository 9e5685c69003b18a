package localproc

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr's ports are free, distinct within a process, and below the
// kernel's ephemeral range where it can be read (no outgoing connection's
// source port can take them between a node's stop and its restart).
func TestFreeAddrBelowTheEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	seen := map[string]bool{}
	for range 20 {
		addr, err := FreeAddr("127.0.0.1", true)
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if lo > 2*minListenPort && (port >= lo || port < lo/2) {
			t.Fatalf("port %d outside [%d, %d)", port, lo/2, lo)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		ln.Close()
	}
}
