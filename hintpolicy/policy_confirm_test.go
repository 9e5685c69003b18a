package hintpolicy

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// designatedFor returns the peer n would ask first about k when accused
// reports it.
func designatedFor(n *pnode, k breakerpool.Key, accused string, tried ...string) string {
	n.pol.mu.Lock()
	defer n.pol.mu.Unlock()
	return n.pol.designateLocked(k, &confirmation{accused: accused, tried: tried})
}

func nodeByID(nodes []*pnode, id string) *pnode {
	for _, n := range nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func outcome(n *pnode, k breakerpool.Key) string {
	ci, _ := n.pol.Confirmation(k)
	return ci.Outcome
}

// confirmSettled: the node's breaker is open and not merely paused.
func confirmSettled(n *pnode, k breakerpool.Key) bool {
	return isOpen(n, k) && outcome(n, k) != ConfirmPending
}

var confirmTestCfg = Config{ConfirmWait: 200 * time.Millisecond}

// TestConfirmDeadDestination: n0's first failure pauses every peer but the
// designated one; its probe fails too, and every node opens at once: two
// calls reach the dead destination for the whole fleet.
func TestConfirmDeadDestination(t *testing.T) {
	const size = 5
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	nodes := startPCluster(t, size, testSettings(breakerpool.HintConfirm, 10*time.Second), confirmTestCfg)
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	k := testKey("dead")
	for _, n := range nodes[1:] {
		n.pool.Get(k)
	}
	d := nodeByID(nodes, designatedFor(nodes[1], k, "n0"))
	_ = nodes[0].call(client, k) // n0's first failure: the accusation
	testwait.For(t, 5*time.Second, "peers to pause and the designated peer to probe", func() bool {
		for _, n := range nodes[1:] {
			s := status(n, k)
			if n == d && s.State != gobreaker.StateHalfOpen || n != d && s.State != gobreaker.StateOpen {
				return false
			}
		}
		return true
	})
	for _, n := range nodes[1:] {
		if n != d && n.call(client, k) == nil {
			t.Fatalf("%s: a paused breaker admitted a call", n.id)
		}
	}
	_ = d.call(client, k) // the designated peer's independent probe fails too
	testwait.For(t, 5*time.Second, "every node to open, confirmed", func() bool {
		for _, n := range nodes {
			if !confirmSettled(n, k) {
				return false
			}
		}
		return true
	})
	for _, n := range nodes[1:] {
		ci, _ := n.pol.Confirmation(k)
		if ci.Outcome != ConfirmConfirmed || ci.Accused != "n0" && n != d {
			t.Fatalf("%s: confirmation %+v, want confirmed, accused n0", n.id, ci)
		}
		if s := status(n, k); n != d && s.OpenRemaining < 2*time.Second {
			t.Fatalf("%s: open for only %v more after the confirmation", n.id, s.OpenRemaining)
		}
	}
	if got := dest.Count(""); got != 2 {
		t.Fatalf("%d calls reached the dead destination, want 2 (n0's failure and %s's probe)", got, d.id)
	}
}

// TestConfirmSickNodeRefuted: n0's own egress fails every call. Its report
// pauses the peers for one round trip; the designated peer's probe passes,
// the peers resume, n0 is distrusted for the key and its trip opens nobody.
func TestConfirmSickNodeRefuted(t *testing.T) {
	const size = 4
	dest := transporttest.NewDestination(t)
	broken := transporttest.NewDestination(t)
	if err := broken.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	nodes := startPCluster(t, size, testSettings(breakerpool.HintConfirm, 10*time.Second), confirmTestCfg)
	setURL(dest.CallbackURL(), nodes[1:]...)
	setURL(broken.CallbackURL(), nodes[0])
	client := newClient(t)
	k := testKey("healthy")
	var drivers []*driver
	for _, n := range nodes[1:] {
		drivers = append(drivers, drive(t, n, client, k, 20))
	}
	tripLocally(t, nodes[0], client, k)
	testwait.For(t, 5*time.Second, "every peer to refute n0", func() bool {
		for _, n := range nodes[1:] {
			if ci, _ := n.pol.Confirmation(k); ci.Outcome != ConfirmRefuted || len(ci.Distrusted) != 1 || ci.Distrusted[0] != "n0" {
				return false
			}
		}
		return true
	})
	waitOpenHandled(t, nodes[0], k, nodes[1:]...)
	after := time.Now()
	testwait.For(t, 10*time.Second, "every peer to deliver, closed", func() bool {
		for i, n := range nodes[1:] {
			if !drivers[i].deliveredSince(after) || status(n, k).State != gobreaker.StateClosed {
				return false
			}
		}
		return true
	})
	// n0's later reports on the key (a fresh generation) are discounted.
	p1 := nodes[1]
	if p1.pol.HandleHint(cluster.Hint{Key: k, State: cluster.HintOpen, Generation: clockOf(p1, k) + 10, Origin: "n0", OpenFor: time.Minute}) {
		t.Fatal("a distrusted open hint reported fresh")
	}
	if actions(t, p1, ActionDistrusted) == 0 || status(p1, k).State != gobreaker.StateClosed {
		t.Fatal("n0's open hint was not discounted")
	}
	for _, n := range nodes[1:] {
		if actions(t, n, ActionConfirmed) != 0 {
			t.Fatalf("%s: confirmed a sick node's report", n.id)
		}
	}
	if status(nodes[0], k).State == gobreaker.StateClosed {
		t.Fatal("n0 should not be closed: its own egress is broken")
	}
}

// TestConfirmDesignatedPeerDown: the designated peer crashed (its peers
// have not noticed yet); after ConfirmWait the next one by rendezvous is
// asked, its probe fails, and the survivors open, confirmed.
func TestConfirmDesignatedPeerDown(t *testing.T) {
	const size = 4
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	nodes := startPCluster(t, size, testSettings(breakerpool.HintConfirm, 10*time.Second), confirmTestCfg)
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	// A key whose first designated peer (n0 accusing) is n1.
	var k breakerpool.Key
	for i := range 1000 {
		k = testKey(fmt.Sprint("dest-", i))
		if designatedFor(nodes[2], k, "n0") == "n1" {
			break
		}
	}
	second := nodeByID(nodes, designatedFor(nodes[2], k, "n0", "n1"))
	survivors := []*pnode{nodes[0], nodes[2], nodes[3]}
	for _, n := range survivors[1:] {
		n.pool.Get(k)
	}
	nodes[1].crash()
	_ = nodes[0].call(client, k) // n0's first failure: n1 is asked and never answers
	testwait.For(t, 10*time.Second, second.id+" to be asked next and probe", func() bool {
		return status(second, k).State == gobreaker.StateHalfOpen
	})
	if got := actions(t, second, ActionConfirmProbe); got != 1 {
		t.Fatalf("%s: confirm_probe = %v, want 1", second.id, got)
	}
	_ = second.call(client, k) // its probe fails too
	testwait.For(t, 10*time.Second, "the survivors to open, confirmed", func() bool {
		for _, n := range survivors {
			if !confirmSettled(n, k) {
				return false
			}
		}
		return true
	})
	for _, n := range survivors[1:] {
		ci, _ := n.pol.Confirmation(k)
		if ci.Outcome != ConfirmConfirmed || ci.By != second.id {
			t.Fatalf("%s: confirmation %+v, want confirmed by %s", n.id, ci, second.id)
		}
	}
	if got := dest.Count(""); got != 2 {
		t.Fatalf("%d calls reached the dead destination, want 2", got)
	}
}

// TestConfirmByHealthCheck: a key with a health check (ConfirmProbe) is
// probed by the designated peer with the check, not a task. The check here
// fails as healthprobe's does (Breaker.FailedCheck): every node opens,
// confirmed, and the dead destination got one call for the whole fleet —
// n0's failure — where a task probe would have made it two.
func TestConfirmByHealthCheck(t *testing.T) {
	const size = 3
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	s := testSettings(breakerpool.HintConfirm, 10*time.Second)
	var checked atomic.Int32
	nodes := make([]*pnode, size)
	for i := range size {
		cfg := confirmTestCfg
		var self atomic.Pointer[pnode]
		cfg.ConfirmProbe = func(k breakerpool.Key) bool {
			n := self.Load()
			b, ok := n.pool.Lookup(k)
			if !ok {
				return false
			}
			checked.Add(1)
			go b.FailedCheck(0) // the health call failed, later, off the policy's lock
			return true
		}
		var join []string
		if i > 0 {
			join = []string{nodes[0].m.GossipAddr()}
		}
		nodes[i] = startPNode(t, fmt.Sprintf("n%d", i), s, cfg, join...)
		self.Store(nodes[i])
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.pol.Close()
		}
	})
	testwait.For(t, 20*time.Second, "cluster to converge", func() bool {
		for _, n := range nodes {
			if n.m.NumAlive() != size {
				return false
			}
		}
		return true
	})
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	k := testKey("dead-health")
	for _, n := range nodes[1:] {
		n.pool.Get(k)
	}
	_ = nodes[0].call(client, k) // n0's first failure: the accusation
	testwait.For(t, 5*time.Second, "every node to open, confirmed by the health check", func() bool {
		for _, n := range nodes {
			if !confirmSettled(n, k) {
				return false
			}
		}
		return true
	})
	// One check answers the round; a slow machine can let ConfirmWait pass
	// first and a second peer be asked: still a check, never a task.
	if checked.Load() < 1 {
		t.Fatal("no health check answered the round")
	}
	for _, n := range nodes[1:] {
		if ci, _ := n.pol.Confirmation(k); ci.Outcome != ConfirmConfirmed {
			t.Fatalf("%s: confirmation %+v, want confirmed", n.id, ci)
		}
	}
	if got := dest.Count(""); got != 1 {
		t.Fatalf("%d calls reached the dead destination, want 1 (n0's failure; no task probe)", got)
	}
}
