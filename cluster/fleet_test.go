package cluster

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
)

// backlogs is a settable BacklogSource: what a node's queue would report.
type backlogs struct {
	mu sync.Mutex
	m  map[breakerpool.Key]int64
}

func (b *backlogs) set(k breakerpool.Key, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[breakerpool.Key]int64{}
	}
	b.m[k] = n
}

func (b *backlogs) FleetBacklogs() []FleetEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []FleetEntry
	for k, n := range b.m {
		if n > 0 {
			out = append(out, FleetEntry{Key: k, Backlog: n})
		}
	}
	return out
}

var fleetKey = breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: "https://d.example"}

// fleetCluster starts n nodes (fast preset, 100 ms reports) each with its
// own backlog source.
func fleetCluster(t *testing.T, n int, opts ...func(*Config)) ([]testNode, []*backlogs) {
	t.Helper()
	opts = append([]func(*Config){func(c *Config) { c.FleetInterval = 100 * time.Millisecond }}, opts...)
	nodes := startCluster(t, n, opts...)
	srcs := make([]*backlogs, n)
	for i, nd := range nodes {
		srcs[i] = &backlogs{}
		nd.SetBacklogSource(srcs[i])
	}
	return nodes, srcs
}

// sharesNear reports whether every node i's own share is within 0.01 of
// want[i] (NaN: don't care).
func sharesNear(nodes []testNode, want []float64) bool {
	for i, nd := range nodes {
		if math.IsNaN(want[i]) {
			continue
		}
		s, ok := nd.FleetShare(fleetKey)
		if !ok || math.Abs(s-want[i]) > 0.01 {
			return false
		}
	}
	return true
}

// The nodes with a backlog share the budget by backlog, every node
// computes the same split, and a node joining or leaving the key's set
// (its backlog appears or drains, or it leaves the cluster) rebalances the
// shares (the time is logged: ≤ 1 s by design, not asserted).
func TestFleetSharesFollowBacklog(t *testing.T) {
	nodes, srcs := fleetCluster(t, 3)
	if _, ok := nodes[0].FleetShare(fleetKey); ok {
		t.Fatal("a key nobody reports has a share")
	}
	srcs[0].set(fleetKey, 800)
	srcs[1].set(fleetKey, 100)
	srcs[2].set(fleetKey, 100)
	testwait.For(t, 5*time.Second, "shares 0.8/0.1/0.1", func() bool { return sharesNear(nodes, []float64{0.8, 0.1, 0.1}) })
	view := nodes[1].FleetShares(fleetKey)
	if len(view) != 3 || view[0].Node != "n0" || math.Abs(view[0].Share-0.8) > 0.01 || view[0].Backlog != 800 {
		t.Fatalf("n1's view of the shares: %+v", view)
	}

	// n2 drains: it leaves the set, n0 and n1 split 8:1.
	srcs[2].set(fleetKey, 0)
	start := time.Now()
	testwait.For(t, 5*time.Second, "rebalance after n2 drained", func() bool {
		return sharesNear(nodes, []float64{800.0 / 900, 100.0 / 900, 0})
	})
	t.Logf("rebalanced %v after a node left the set (by design ≤ FleetInterval + FleetJoinDelay + the queue's 100 ms tick)", time.Since(start).Round(time.Millisecond))
	// n2 has tasks again: it joins the set.
	srcs[2].set(fleetKey, 900)
	start = time.Now()
	testwait.For(t, 5*time.Second, "rebalance after n2 came back", func() bool {
		return sharesNear(nodes, []float64{800.0 / 1800, 100.0 / 1800, 900.0 / 1800})
	})
	t.Logf("rebalanced %v after a node joined the set (by design ≤ FleetInterval + FleetJoinDelay + the queue's 100 ms tick)", time.Since(start).Round(time.Millisecond))
	// A graceful leave of the cluster: the two others take the whole budget.
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	testwait.For(t, 5*time.Second, "rebalance after n2 left the cluster", func() bool {
		return sharesNear(nodes[:2], []float64{800.0 / 900, 100.0 / 900})
	})
	t.Logf("rebalanced %v after a node left the cluster (by design ≤ FleetInterval + FleetJoinDelay + the queue's 100 ms tick)", time.Since(start).Round(time.Millisecond))
}

// A node that hears none of its peers falls back to budget / last-known N,
// never to the whole budget, however long it stays cut off; nodes that
// still hear each other hold the silent node's slot, then forget it after
// FleetSilentForget.
func TestFleetPartitionFallsBackToLastKnownN(t *testing.T) {
	nodes, srcs := fleetCluster(t, 3, func(c *Config) { c.FleetSilentForget = 2 * time.Second })
	for i := range srcs {
		srcs[i].set(fleetKey, 100)
	}
	third := 1.0 / 3
	testwait.For(t, 5*time.Second, "equal shares", func() bool { return sharesNear(nodes, []float64{third, third, third}) })

	// n2 crashes (no leave): n0 and n1 keep its third for it.
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "n2 silent, its slot held", func() bool {
		v := nodes[0].FleetShares(fleetKey)
		return len(v) == 3 && v[2].Silent && sharesNear(nodes[:2], []float64{third, third})
	})
	// After FleetSilentForget the two that hear each other take it back.
	testwait.For(t, 10*time.Second, "n2 forgotten", func() bool { return sharesNear(nodes[:2], []float64{0.5, 0.5}) })

	// n1 crashes too: n0 hears nobody and keeps 1/2 — even once memberlist
	// has declared n1 dead and the forget time has passed.
	if err := nodes[1].Shutdown(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "n0 alone", func() bool { return nodes[0].NumAlive() == 1 })
	deadline := time.Now().Add(3 * time.Second) // > FleetSilentForget past n1's last report
	for time.Now().Before(deadline) {
		if s, ok := nodes[0].FleetShare(fleetKey); !ok || s > 0.5+1e-9 {
			t.Fatalf("a node cut off from its peers took share %v (ok %v), want ≤ 1/2 (last-known N = 2)", s, ok)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s, _ := nodes[0].FleetShare(fleetKey); math.Abs(s-0.5) > 1e-9 {
		t.Fatalf("n0 alone: share %v, want 1/2; view %+v", s, nodes[0].FleetShares(fleetKey))
	}
}

// A node takes no share of a budget before it has been joined for a TTL:
// just (re)started, it does not know its peers' shares, nor how many there
// are.
func TestFleetColdStart(t *testing.T) {
	n := startNode(t, "n0", func(c *Config) { c.FleetInterval = time.Second }) // TTL 3 s
	src := &backlogs{}
	src.set(fleetKey, 10)
	n.SetBacklogSource(src)
	if n.FleetWarm() {
		t.Fatal("warm right after Start")
	}
	testwait.For(t, 10*time.Second, "its own report", func() bool { _, ok := n.FleetShare(fleetKey); return ok })
	if s, _ := n.FleetShare(fleetKey); s != 0 && !n.FleetWarm() {
		t.Fatalf("share %v before warm", s)
	}
	testwait.For(t, 10*time.Second, "warm, alone in the set", func() bool { s, _ := n.FleetShare(fleetKey); return n.FleetWarm() && s == 1 })
}

// Reports from nodes that are not alive members, and malformed ones, are
// dropped and counted; they never change a share.
func TestFleetReportsFromStrangersDropped(t *testing.T) {
	nodes, srcs := fleetCluster(t, 2)
	srcs[0].set(fleetKey, 10)
	testwait.For(t, 5*time.Second, "n0 alone in the set", func() bool { return sharesNear(nodes, []float64{1, 0}) })
	enc, err := EncodeFleetReport(FleetReport{Origin: "intruder", Entries: []FleetEntry{{Key: fleetKey, Backlog: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].receiveFleetReport(enc)
	nodes[0].receiveFleetReport([]byte{1, 9})
	nodes[0].receiveFleetReport(append([]byte(nil), enc[:len(enc)-1]...))
	if s, _ := nodes[0].FleetShare(fleetKey); s != 1 {
		t.Fatalf("share %v after a stranger's report, want 1", s)
	}
	if got := counter(t, nodes[0].metrics.fleetReports, "unknown_origin"); got != 1 {
		t.Errorf("unknown_origin = %v, want 1", got)
	}
	if got := counter(t, nodes[0].metrics.fleetReports, "invalid"); got != 2 {
		t.Errorf("invalid = %v, want 2", got)
	}
}

// This node's own backlog counts at once when it shrinks and only
// FleetJoinDelay after it grows (a first report included: joining).
func TestFleetOwnBacklogDelaysGrowth(t *testing.T) {
	fs := &fleetState{own: map[breakerpool.Key][]ownReport{}}
	t0 := time.Unix(1000, 0)
	report := func(at time.Duration, b int64) {
		fs.own[fleetKey] = append(pruneOwn(fs.own[fleetKey], t0.Add(at)), ownReport{at: t0.Add(at), backlog: b})
	}
	ms := time.Millisecond
	report(0, 100)
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{{0, 0}, {149 * ms, 0}, {150 * ms, 100}} {
		if got := fs.ownBacklogLocked(fleetKey, t0.Add(tc.at)); got != tc.want {
			t.Fatalf("joining, at %v: %d, want %d", tc.at, got, tc.want)
		}
	}
	report(250*ms, 400) // grows: the old value until 400 ms
	if got := fs.ownBacklogLocked(fleetKey, t0.Add(260*ms)); got != 100 {
		t.Fatalf("grown to 400, 10 ms later: %d, want 100", got)
	}
	report(300*ms, 50) // shrinks: at once
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{{300 * ms, 50}, {399 * ms, 50}, {450 * ms, 50}} {
		if got := fs.ownBacklogLocked(fleetKey, t0.Add(tc.at)); got != tc.want {
			t.Fatalf("at %v: %d, want %d", tc.at, got, tc.want)
		}
	}
	report(500*ms, 80)
	if got := fs.ownBacklogLocked(fleetKey, t0.Add(600*ms)); got != 50 {
		t.Fatalf("80 after 50, 100 ms later: %d, want 50", got)
	}
	if got := fs.ownBacklogLocked(fleetKey, t0.Add(650*ms)); got != 80 {
		t.Fatalf("80 after 50, 150 ms later: %d, want 80", got)
	}
	if n := len(fs.own[fleetKey]); n > 3 {
		t.Fatalf("%d reports kept, want the settled one and the newer", n)
	}
}

// A node reports its 256 biggest budgeted keys; for the others FleetShare
// says it does not know (the caller falls back to an equal split).
func TestFleetReportCapsKeys(t *testing.T) {
	n := startNode(t, "n0", func(c *Config) { c.FleetInterval = 100 * time.Millisecond })
	src := &backlogs{}
	key := func(i int) breakerpool.Key {
		return breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: "https://d" + strconv.Itoa(i) + ".example"}
	}
	for i := range maxFleetKeysPerRound + 10 {
		src.set(key(i), int64(1000-i))
	}
	n.SetBacklogSource(src)
	testwait.For(t, 5*time.Second, "the biggest key's share", func() bool { s, ok := n.FleetShare(key(0)); return ok && s == 1 })
	if _, ok := n.FleetShare(key(maxFleetKeysPerRound - 1)); !ok {
		t.Fatal("the 256th key is not reported")
	}
	if s, ok := n.FleetShare(key(maxFleetKeysPerRound)); ok {
		t.Fatalf("the 257th key has share %v, want not known", s)
	}
}

// idleBacklogs is an IdleBacklogSource whose idleness the test sets.
type idleBacklogs struct {
	backlogs
	idle  atomic.Bool
	wake  chan struct{}
	calls atomic.Int64
}

func (b *idleBacklogs) FleetBacklogs() []FleetEntry {
	b.calls.Add(1)
	return b.backlogs.FleetBacklogs()
}
func (b *idleBacklogs) FleetIdle() bool            { return b.idle.Load() }
func (b *idleBacklogs) FleetWake() <-chan struct{} { return b.wake }

// An idle source with nothing to report is sampled only when a report is
// due (every keepalive: it reports its empty set then); its wake puts the
// loop back to FleetInterval / 5, and a key that then appears reaches the
// peers.
func TestFleetIdleSourceSampledOnlyWhenAReportIsDue(t *testing.T) {
	nodes, _ := fleetCluster(t, 2)
	src := &idleBacklogs{wake: make(chan struct{}, 1)}
	src.idle.Store(true)
	nodes[0].SetBacklogSource(src)
	fs := nodes[0].fleet
	if fs.keepalive <= fs.interval {
		t.Fatalf("keepalive %v, want more than the interval %v", fs.keepalive, fs.interval)
	}
	testwait.For(t, 5*time.Second, "sampling every keepalive while idle", func() bool {
		return time.Duration(fs.sampleEvery.Load()) == fs.keepalive
	})
	before := src.calls.Load()
	testwait.For(t, 10*time.Second, "samples while idle", func() bool { return src.calls.Load() >= before+3 })

	src.idle.Store(false)
	src.set(fleetKey, 10)
	src.wake <- struct{}{}
	testwait.For(t, 5*time.Second, "sampling every FleetInterval / 5 after the wake", func() bool {
		return time.Duration(fs.sampleEvery.Load()) == fs.interval/fleetSampleDivisor
	})
	testwait.For(t, 5*time.Second, "the peer hearing the new key", func() bool {
		for _, s := range nodes[1].FleetShares(fleetKey) {
			if s.Node == nodes[0].cfg.NodeID && s.Backlog == 10 {
				return true
			}
		}
		return false
	})
}

// A node with nothing to report sends its empty report every keepalive,
// not every interval; one whose set has just emptied reports every
// interval for a TTL, so its peers see it leave the key's set; and a peer
// that only hears keepalives still counts as heard (it forgets a crashed
// node's slot rather than keep it as if cut off alone).
func TestFleetEmptyReportsEveryKeepalive(t *testing.T) {
	nodes, srcs := fleetCluster(t, 3, func(c *Config) { c.FleetSilentForget = 2 * time.Second })
	fs := nodes[0].fleet
	received := func() float64 { return counter(t, nodes[1].metrics.fleetReports, "received") }
	// Idle: n1 hears n0 and n2 about once per keepalive each.
	testwait.For(t, 5*time.Second, "n0 past a TTL with nothing to report", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return !fs.lastSent.IsZero() && fs.gapLocked(time.Now()) == fs.keepalive
	})
	before, start := received(), time.Now()
	testwait.For(t, 10*time.Second, "keepalives from both peers", func() bool { return received() >= before+4 })
	took := time.Since(start)
	if perInterval := 2 * float64(took) / float64(fs.interval); received()-before > perInterval/2 {
		t.Fatalf("n1 got %v reports in %v from two idle peers: want about one per keepalive (%v) each, not one per interval (%v)",
			received()-before, took.Round(time.Millisecond), fs.keepalive, fs.interval)
	}

	// n0 and n2 report a key; n2 drains and its peers see it leave at once.
	srcs[0].set(fleetKey, 100)
	srcs[2].set(fleetKey, 100)
	testwait.For(t, 5*time.Second, "n0 and n2 share", func() bool { return sharesNear(nodes, []float64{0.5, 0, 0.5}) })
	srcs[2].set(fleetKey, 0)
	testwait.For(t, 5*time.Second, "n2 left the set", func() bool { return sharesNear(nodes, []float64{1, 0, 0}) })

	// n2 has a key again and crashes: n0, which hears n1 only through its
	// keepalives, holds n2's slot, then forgets it after FleetSilentForget.
	srcs[2].set(fleetKey, 100)
	testwait.For(t, 5*time.Second, "n2 back", func() bool { return sharesNear(nodes, []float64{0.5, 0, 0.5}) })
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "n2 silent, its slot held", func() bool {
		v := nodes[0].FleetShares(fleetKey)
		return len(v) == 2 && v[1].Silent && sharesNear(nodes[:1], []float64{0.5})
	})
	testwait.For(t, 10*time.Second, "n2 forgotten by n0, which hears n1's keepalives", func() bool { return sharesNear(nodes[:1], []float64{1}) })

	// The window itself: a peer last heard longer ago than a TTL but within
	// two keepalives still counts as heard, so a node silent for longer than
	// FleetSilentForget is forgotten; past the window nobody is heard and
	// nothing is forgotten.
	now := time.Now()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	clear(fs.origins)
	fs.originLocked("idle-peer").heard = now.Add(-fs.ttl - fs.keepalive)
	fs.originLocked("gone").heard = now.Add(-fs.forget - time.Second)
	nodes[0].forgetLocked(now)
	if _, ok := fs.origins["gone"]; ok {
		t.Fatalf("a node silent for %v was kept though a peer was heard %v ago (within %v)", fs.forget+time.Second, fs.ttl+fs.keepalive, fs.hearWindow)
	}
	fs.originLocked("idle-peer").heard = now.Add(-fs.hearWindow - time.Millisecond)
	fs.originLocked("gone").heard = now.Add(-fs.forget - time.Second)
	nodes[0].forgetLocked(now)
	if _, ok := fs.origins["gone"]; !ok {
		t.Fatal("a node hearing no peer within its window forgot a silent one")
	}
}
