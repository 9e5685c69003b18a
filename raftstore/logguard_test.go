package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// errNoSpace is what a full disk's writes answer.
var errNoSpace = errors.New("write wal/00000000000000000001.wal: no space left on device")

// faultyLogs refuses writes while fail is set, as a full disk does.
type faultyLogs struct {
	logStore
	fail atomic.Bool
}

func (f *faultyLogs) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func (f *faultyLogs) StoreLogs(ls []*raft.Log) error {
	if f.fail.Load() {
		return errNoSpace
	}
	return f.logStore.StoreLogs(ls)
}

// withFaultyLogs puts a faultyLogs under s's guard; call it before Start.
func withFaultyLogs(s *Store) *faultyLogs {
	f := &faultyLogs{logStore: s.guard.logStore}
	s.guard.logStore = f
	return f
}

// A follower whose log store refuses writes (its disk full) applies
// nothing new while the leader's heartbeats still reach it. It counts as
// out of contact at once (so it makes no call from its frozen state), its
// failed writes are counted, and once they have failed for LogFailFatal
// with none succeeding it fails (Failed, FailErr naming the cause), so
// that the node stops and its shards move. The others go on committing.
// Before, it stayed in contact and went on calling from a state that no
// longer moved.
func TestFollowerWhoseLogStoreRefusesWritesFails(t *testing.T) {
	c := newTestCluster(t, func(cfg *Config) { cfg.LogFailFatal = time.Second })
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	faulty := withFaultyLogs(c.nodes["n3"])
	c.start("n1", "n2", "n3")
	leader := c.leader(10 * time.Second)
	if leader == c.nodes["n3"] {
		if err := leader.TransferLeadership(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		leader = c.leader(10 * time.Second)
	}
	n3 := c.nodes["n3"]
	testwait.For(t, 10*time.Second, "n3 in contact", func() bool { return n3.InContact(n3.ContactLag()) })

	faulty.fail.Store(true)
	failAt := time.Now()
	write := func(i int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := leader.SetConfig(ctx, state.SetConfigCommand{Key: "k", Value: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
			t.Fatalf("write %d on the leader with n3's disk full: %v", i, err)
		}
	}
	write(1)
	testwait.For(t, 10*time.Second, "n3 out of contact, its writes failing", func() bool {
		_, _, failing := n3.LogWritesFailing()
		return failing && !n3.InContact(0)
	})
	write(2) // the others commit without it
	testwait.For(t, 10*time.Second, "n3 failed", func() bool { return n3.FailErr() != nil })
	select {
	case <-n3.Failed():
	default:
		t.Fatal("FailErr set but Failed not closed")
	}
	if err := n3.FailErr(); !errors.Is(err, errNoSpace) {
		t.Fatalf("FailErr %v, want it to wrap the log store's error", err)
	}
	if took := time.Since(failAt); took < time.Second {
		t.Fatalf("n3 failed %v after its writes began to fail, before LogFailFatal (1s)", took)
	}
	// A wait for what n3 will never apply (a result write's, at shutdown)
	// ends with the failure, not at its deadline.
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if err := n3.WaitForApplied(wctx, leader.fsm.AppliedIndex()+1); !errors.Is(err, errNoSpace) {
		t.Fatalf("n3's wait for an index past the failure = %v, want the failure", err)
	}
	if got := gatheredCounter(t, c.regs["n3"], "fusebox_raft_log_write_failures_total"); got < 1 {
		t.Errorf("fusebox_raft_log_write_failures_total %v, want at least 1", got)
	}
	if leader.FailErr() != nil {
		t.Errorf("the leader failed too: %v", leader.FailErr())
	}
}

// The policy alone, run by hand: an episode of failed writes ends only
// after a quiet period of good ones (one good write among failures, as a
// full disk allows, does not end it), and fails the store once it has
// lasted LogFailFatal with a write failed lately.
func TestLogWriteFailurePolicy(t *testing.T) {
	c := newTestCluster(t, func(cfg *Config) { cfg.LogFailFatal = time.Minute })
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	g := s.guard
	if g.quiet != 15*time.Second {
		t.Fatalf("quiet period %v, want LogFailFatal/4", g.quiet)
	}

	s.checkLogWrites() // writes succeed
	if s.FailErr() != nil {
		t.Fatalf("failed with writes succeeding: %v", s.FailErr())
	}
	_ = g.track(errNoSpace)
	_ = g.track(nil) // a small write that still fit
	if _, _, ok := s.LogWritesFailing(); !ok || s.InContact(0) {
		t.Fatal("one good write among failures ended the episode")
	}
	g.lastFail.Store(time.Now().Add(-16 * time.Second).UnixNano())
	_ = g.track(nil) // good writes for longer than the quiet period
	if _, _, ok := s.LogWritesFailing(); ok || !s.InContact(0) {
		t.Fatal("the episode did not end after a quiet period of good writes")
	}

	_ = g.track(errNoSpace)
	g.failingSince.Store(time.Now().Add(-30 * time.Second).UnixNano())
	s.checkLogWrites() // half the window
	if s.FailErr() != nil {
		t.Fatalf("failed after half of LogFailFatal: %v", s.FailErr())
	}
	g.failingSince.Store(time.Now().Add(-61 * time.Second).UnixNano())
	g.lastFail.Store(time.Now().Add(-20 * time.Second).UnixNano())
	s.checkLogWrites() // long enough, but no write tried lately
	if s.FailErr() != nil {
		t.Fatalf("failed with no write failing in the last quiet period: %v", s.FailErr())
	}
	// Still failing, as raft-wal fails once a segment rotation failed: the
	// error says how to get the node back if a restart cannot reopen it.
	_ = g.track(fmt.Errorf("append: %w", wal.ErrSealed))
	s.checkLogWrites()
	err := s.FailErr()
	if !errors.Is(err, wal.ErrSealed) {
		t.Fatalf("FailErr %v after more than LogFailFatal of failed writes, want the log store's error", err)
	}
	if !strings.Contains(err.Error(), "--rejoin-empty") {
		t.Errorf("FailErr for a sealed log does not say how to rejoin: %v", err)
	}
}

// gatheredCounter is the value of the unlabelled counter name in reg.
func gatheredCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
