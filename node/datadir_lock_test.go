package node

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A second node on a data dir in use stops at once, naming --data-dir.
// It waited for good inside the Raft store's lock: nothing logged, its
// HTTP port bound but never served, SIGTERM ignored. Once the first node
// has closed, the data dir is free again.
func TestDataDirInUseRefused(t *testing.T) {
	first := startNode(t, testConfig(t, "n1", 1, nil))
	cfg := testConfig(t, "n1", 1, nil)
	cfg.DataDir = first.cfg.DataDir
	second, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = second.Start(ctx)
	_ = second.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--data-dir") || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second node on the data dir in use: %v; want an error naming --data-dir", err)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := lockDataDir(cfg.DataDir)
	if err != nil {
		t.Fatalf("the data dir is still locked after its node closed: %v", err)
	}
	_ = f.Close()
}

// A taken --raft-addr or --gossip-addr is named by its flag: the errors
// were the components' own ("raft transport on …", memberlist's "Failed
// to start TCP listener"), which leave the operator to guess the flag.
func TestTakenAddressNamesItsFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, flag := range []string{"--raft-addr", "--gossip-addr"} {
		cfg := testConfig(t, "n1", 1, nil)
		if flag == "--raft-addr" {
			cfg.RaftAddr = taken.Addr().String()
		} else {
			cfg.GossipAddr = taken.Addr().String()
		}
		n, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		err = n.Start(t.Context())
		_ = n.Close(context.Background())
		if err == nil || !strings.HasPrefix(err.Error(), flag+" "+taken.Addr().String()) {
			t.Fatalf("%s taken: %v; want an error naming the flag", flag, err)
		}
	}
}
