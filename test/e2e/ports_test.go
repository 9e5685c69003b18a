package e2e

import (
	"fmt"
	"net"
	"sync"
)

// assignPorts gives cfg fresh http, gossip (TCP+UDP) and raft ports on host.
func assignPorts(cfg *ProcessConfig, host string) error {
	var err error
	if cfg.HTTPAddr, err = freeAddr(host, false); err != nil {
		return err
	}
	if cfg.GossipAddr, err = freeAddr(host, true); err != nil {
		return err
	}
	cfg.RaftAddr, err = freeAddr(host, false)
	return err
}

// freeAddr reserves nothing: it binds host:0 (TCP and, for gossip, UDP on
// the same port), closes, and returns the address. Another process can take
// it before fusebox binds; callers retry on errAddrInUse.
func freeAddr(host string, udpToo bool) (string, error) {
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
		if claimPort(addr) {
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free port on %s after 50 tries", host)
}

// handedOut keeps this test binary from giving one port to two nodes.
var handedOut sync.Map

func claimPort(addr string) bool {
	_, loaded := handedOut.LoadOrStore(addr, true)
	return !loaded
}
