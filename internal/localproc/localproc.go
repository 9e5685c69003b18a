// Package localproc has the small pieces that programs driving real fusebox
// processes on one host share — the chaos tests (test/e2e) and the demo
// (tools/demo): free loopback ports and log tails.
package localproc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// claimed keeps this process from handing one port to two listeners.
var claimed sync.Map

// FreeAddr finds a free port on host (TCP, and UDP on the same port when
// udpToo, for gossip) by binding it and closing. Nothing is reserved:
// another process can take the port before the node binds it, so callers
// retry a start that fails with "address already in use".
//
// The port is chosen below the kernel's ephemeral range
// (ip_local_port_range) when that can be read. A port from the range, once
// its process stops, can become the source port of any outgoing connection
// on the machine, and stays taken while that connection lives: a node
// restarted on its ports (a chaos test's kill and restart) then failed to
// bind its Raft port for every retry. Below the range only a listener can
// take it.
func FreeAddr(host string, udpToo bool) (string, error) {
	lo := ephemeralLow()
	for range 100 {
		port := "0"
		if lo > 2*minListenPort {
			port = strconv.Itoa(lo/2 + rand.IntN(lo-lo/2)) // [lo/2, lo)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			if port != "0" {
				continue // taken: another
			}
			return "", fmt.Errorf("allocate a port on %s: %w", host, err)
		}
		addr := ln.Addr().String()
		if udpToo {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				ln.Close()
				continue
			}
			pc.Close()
		}
		ln.Close()
		if _, taken := claimed.LoadOrStore(addr, true); !taken {
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free port on %s after 100 tries", host)
}

// minListenPort bounds the ports FreeAddr picks from below.
const minListenPort = 1024

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo > 65535 {
		return 0
	}
	return lo
}

// LogTail returns the last n lines of the file at path (a process's log).
func LogTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
