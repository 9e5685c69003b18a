package node

import (
	"errors"
	"strings"
	"testing"
)

func TestReloadRunsEveryReloaderAndNamesFailures(t *testing.T) {
	n, err := New(Config{NodeID: "n1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Shards: 1, Timing: "fast"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(); err != nil {
		t.Fatalf("Reload with nothing to reload: %v", err)
	}
	var ran []string
	n.addReloader("first", func() error { ran = append(ran, "first"); return errors.New("bad file x.pem") })
	n.addReloader("second", func() error { ran = append(ran, "second"); return nil })
	err = n.Reload()
	if err == nil || !strings.Contains(err.Error(), "reload first: bad file x.pem") {
		t.Fatalf("Reload: %v, want the first reloader's error, named", err)
	}
	if strings.Join(ran, ",") != "first,second" {
		t.Fatalf("reloaders run: %v, want both even after a failure", ran)
	}
}
