// Package localproc has the small pieces that programs driving real fusebox
// processes on one host share — the chaos tests (test/e2e) and the demo
// (tools/demo): free loopback ports and log tails.
package localproc

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"sync"
)

// claimed keeps this process from handing one port to two listeners.
var claimed sync.Map

// FreeAddr finds a free port on host (TCP, and UDP on the same port when
// udpToo, for gossip) by binding port 0 and closing. Nothing is reserved:
// another process can take the port before the node binds it, so callers
// retry a start that fails with "address already in use".
func FreeAddr(host string, udpToo bool) (string, error) {
	for range 50 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
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
	return "", fmt.Errorf("no free port on %s after 50 tries", host)
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
