package cluster

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fusebox/breakerpool"
)

// Fleet rate budget (issue 19 §3, DESIGN.md "Fleet rate budget"): each node
// tells its peers its backlog per budgeted key, directly over UDP every
// FleetInterval; every node then takes the share of a key's budget its
// backlog weighs among the nodes that have one. No consensus: a node's view
// is what it heard in the last fleetTTL.

// Defaults of the fleet timings.
const (
	DefaultFleetInterval     = 250 * time.Millisecond
	DefaultFleetSilentForget = 30 * time.Second
	// fleetTTLIntervals is how many intervals a report stays fresh: one
	// lost packet in a row does not drop a node from a key's set.
	fleetTTLIntervals = 3
	// maxFleetKeysPerRound bounds the keys one node reports per round (top
	// backlogs first) and the keys kept per origin.
	maxFleetKeysPerRound = 256
	// FleetJoinDelay is how long this node waits, after it reports a
	// bigger backlog for a key (a first one included), before its own
	// share grows with it: its peers must have heard the report and
	// lowered their shares first (the queue retunes every 100 ms). A
	// smaller backlog counts at once (that only lowers its share). A node
	// joining a key's set thus has share 0 (or the equal split when nobody
	// else reports the key) for this long after its first report.
	FleetJoinDelay = 150 * time.Millisecond
	// fleetKeepaliveIntervals: a node with nothing to report (no key in its
	// set for a TTL) sends its empty report — the heartbeat that tells its
	// peers it is there — every this many intervals instead of every one
	// (at most every FleetSilentForget / 4): it was N − 1 packets per node
	// per 250 ms on every idle cluster, each a wake-up of the receiver.
	fleetKeepaliveIntervals = 8
	// fleetSampleDivisor: the loop reads the backlogs FleetInterval /
	// fleetSampleDivisor apart and reports at once when a key appears, so
	// a node joining a key's set need not wait for the next round.
	fleetSampleDivisor = 5
)

// BacklogSource is this node's backlog per key that has a fleet budget,
// only keys with a backlog (> 0). The queue implements it.
type BacklogSource interface {
	FleetBacklogs() []FleetEntry
}

// IdleBacklogSource is a BacklogSource that can also tell when no key can
// appear in its backlogs until it says so (the queue with no group at
// all). While it is idle the loop samples only when a report is due
// (every FleetInterval, or every keepalive once its set has been empty for
// a TTL), and FleetWake's signal puts it back to sampling every
// FleetInterval / 5: an idle node's wake-ups cost CPU (each about 270 µs
// on the test VM), and these were 20 a second.
type IdleBacklogSource interface {
	BacklogSource
	FleetIdle() bool
	FleetWake() <-chan struct{}
}

type backlogBox struct{ src BacklogSource }

// fleetEntry is one origin's last reported backlog of a key.
type fleetEntry struct {
	backlog int64
	at      time.Time
}

// fleetOrigin is what this node heard from one node (itself included).
type fleetOrigin struct {
	heard time.Time // its last report, any key
	keys  map[breakerpool.Key]fleetEntry
}

// ownReport is one of this node's reported backlogs for a key
// (FleetJoinDelay).
type ownReport struct {
	at      time.Time
	backlog int64
}

// fleetState is the fleet budget's table. mu is a leaf lock.
type fleetState struct {
	interval, ttl, forget time.Duration
	// keepalive is the period of an empty report once this node's set has
	// been empty for a TTL; hearWindow is how long a peer counts as heard
	// for forgetLocked (two keepalives and an interval: one may be lost).
	keepalive, hearWindow time.Duration
	src                   atomic.Pointer[backlogBox]
	sampleEvery           atomic.Int64 // the loop's sampling period now (ns), for tests

	mu       sync.Mutex
	origins  map[string]*fleetOrigin
	overflow map[breakerpool.Key]struct{} // own keys left out of the last round
	joinedAt time.Time                    // first round after the node joined (FleetWarm)
	// own is this node's reports per key still in its set: the newest one
	// at least FleetJoinDelay old, then the newer ones (ownBacklogLocked).
	own       map[breakerpool.Key][]ownReport
	lastSent  time.Time // the last round
	lastKeyed time.Time // the last round that had a key (or left one out)
}

func newFleetState(cfg Config) *fleetState {
	fs := &fleetState{
		interval: cfg.FleetInterval, ttl: fleetTTLIntervals * cfg.FleetInterval, forget: cfg.FleetSilentForget,
		origins: make(map[string]*fleetOrigin), overflow: map[breakerpool.Key]struct{}{},
		own: map[breakerpool.Key][]ownReport{},
	}
	fs.keepalive = max(fs.interval, min(fleetKeepaliveIntervals*fs.interval, fs.forget/4))
	fs.hearWindow = 2*fs.keepalive + fs.interval
	fs.src.Store(&backlogBox{})
	return fs
}

// gapLocked is how long after the last round the next one is due: an
// interval while this node has a key in its set, or had one within a TTL
// (so that a lost empty report does not leave it counted), else the
// keepalive. fs.mu held.
func (fs *fleetState) gapLocked(now time.Time) time.Duration {
	if len(fs.own) > 0 || len(fs.overflow) > 0 || now.Sub(fs.lastKeyed) < fs.ttl {
		return fs.interval
	}
	return fs.keepalive
}

// SetBacklogSource installs this node's backlog source (nil removes it).
// Until one is installed the node reports nothing.
func (m *Membership) SetBacklogSource(src BacklogSource) { m.fleet.src.Store(&backlogBox{src}) }

// fleetLoop sends this node's report every FleetInterval (every keepalive
// while it has had nothing to report for a TTL: gapLocked) until Close,
// and at once (checked every FleetInterval/5, or only when a report is due
// while an IdleBacklogSource is idle) when a key appears in its backlogs.
func (m *Membership) fleetLoop() {
	fs := m.fleet
	fast := fs.interval / fleetSampleDivisor
	t := time.NewTicker(fast)
	defer t.Stop()
	period := fast
	for {
		want, wake := fast, (<-chan struct{})(nil)
		if is, ok := m.fleet.src.Load().src.(IdleBacklogSource); ok && is.FleetIdle() {
			fs.mu.Lock()
			want, wake = fs.gapLocked(time.Now()), is.FleetWake()
			fs.mu.Unlock()
		}
		if want != period {
			t.Reset(want)
			period = want
		}
		fs.sampleEvery.Store(int64(period))
		select {
		case <-m.stop:
			return
		case <-wake: // a key may appear: sample every FleetInterval / 5 again
		case now := <-t.C:
			entries := m.readBacklogs()
			fs.mu.Lock()
			due := now.Sub(fs.lastSent) >= fs.gapLocked(now)-fs.interval/(2*fleetSampleDivisor)
			for _, e := range entries {
				_, known := fs.own[e.Key]
				_, over := fs.overflow[e.Key] // not reported: no hurry
				if !known && !over && e.Backlog > 0 {
					due = true // a key joins this node's set
				}
			}
			fs.mu.Unlock()
			if due {
				m.sendFleetReport(now, entries)
			}
		}
	}
}

// readBacklogs reads the source's backlogs (nil without a source).
func (m *Membership) readBacklogs() []FleetEntry {
	if src := m.fleet.src.Load().src; src != nil {
		return src.FleetBacklogs()
	}
	return nil
}

// sendFleetReport records entries (the backlogs just read) as this node's
// own and sends them to every live peer. A node with nothing to report
// still sends an empty report (a heartbeat): every interval for a TTL after
// its set emptied, so that peers see it leave a key's set (heard, key
// absent) rather than fall silent, then every keepalive, so that a node
// knows whether it hears any peer at all (gapLocked, forgetLocked).
func (m *Membership) sendFleetReport(now time.Time, entries []FleetEntry) {
	fs := m.fleet
	var over []FleetEntry // not reported: their share falls back to an equal split
	seen := make(map[breakerpool.Key]bool, len(entries))
	for i := range entries {
		entries[i].Backlog = min(entries[i].Backlog, MaxFleetBacklog)
	}
	entries = slices.DeleteFunc(entries, func(e FleetEntry) bool {
		if e.Backlog <= 0 || seen[e.Key] {
			return true
		}
		seen[e.Key] = true
		if e.validate(0) != nil || fleetEntrySize(e)+len(m.cfg.NodeID)+4 > MaxFleetReportSize {
			over = append(over, e)
			return true
		}
		return false
	})
	slices.SortFunc(entries, func(a, b FleetEntry) int { return cmp.Compare(b.Backlog, a.Backlog) })
	if len(entries) > maxFleetKeysPerRound {
		over = append(over, entries[maxFleetKeysPerRound:]...)
		entries = entries[:maxFleetKeysPerRound]
	}
	fs.mu.Lock()
	if fs.joinedAt.IsZero() && m.Joined() {
		fs.joinedAt = now
	}
	fs.lastSent = now
	if len(entries) > 0 || len(over) > 0 {
		fs.lastKeyed = now
	}
	self := fs.originLocked(m.cfg.NodeID)
	self.heard = now
	clear(self.keys)
	for _, e := range entries {
		self.keys[e.Key] = fleetEntry{backlog: e.Backlog, at: now}
		fs.own[e.Key] = append(pruneOwn(fs.own[e.Key], now), ownReport{at: now, backlog: e.Backlog})
	}
	for k := range fs.own {
		if _, ok := self.keys[k]; !ok {
			delete(fs.own, k) // left the set: a return starts from 0
		}
	}
	clear(fs.overflow)
	for _, e := range over {
		fs.overflow[e.Key] = struct{}{}
	}
	fs.mu.Unlock()
	if fs.src.Load().src == nil {
		return // not part of any budget yet (no queue)
	}
	ml := m.ml.Load()
	peers := m.table.snap.Load().peers
	for _, msg := range splitFleetReport(m.cfg.NodeID, entries) {
		for _, p := range peers {
			if err := ml.SendBestEffort(p, msg); err != nil {
				m.metrics.fleetReports.WithLabelValues("send_error").Inc()
				continue
			}
			m.metrics.fleetReports.WithLabelValues("sent").Inc()
		}
	}
}

// pruneOwn drops the reports older than the newest one that is at least
// FleetJoinDelay old at now (that one stays: it is the settled value).
func pruneOwn(rs []ownReport, now time.Time) []ownReport {
	settled := -1
	for i, r := range rs {
		if now.Sub(r.at) >= FleetJoinDelay {
			settled = i
		}
	}
	if settled > 0 {
		rs = append(rs[:0], rs[settled:]...)
	}
	return rs
}

// ownBacklogLocked is the backlog this node's own share of k uses at now:
// the smallest of its newest report at least FleetJoinDelay old (0 if
// none: it is joining the set) and the reports since. fs.mu held.
func (fs *fleetState) ownBacklogLocked(k breakerpool.Key, now time.Time) int64 {
	var b int64
	settled := false
	for _, r := range fs.own[k] {
		if now.Sub(r.at) >= FleetJoinDelay {
			b, settled = r.backlog, true
		}
	}
	if !settled {
		return 0
	}
	for _, r := range fs.own[k] {
		if now.Sub(r.at) < FleetJoinDelay {
			b = min(b, r.backlog)
		}
	}
	return b
}

// originLocked returns id's record, creating it. fs.mu held.
func (fs *fleetState) originLocked(id string) *fleetOrigin {
	o := fs.origins[id]
	if o == nil {
		o = &fleetOrigin{keys: make(map[breakerpool.Key]fleetEntry)}
		fs.origins[id] = o
	}
	return o
}

// receiveFleetReport records a peer's report. Reports from this node's own
// ID or from nodes that are not alive members are dropped: the table is
// bounded by the membership.
func (m *Membership) receiveFleetReport(body []byte) {
	r, err := DecodeFleetReport(body)
	if err != nil {
		m.metrics.fleetReports.WithLabelValues("invalid").Inc()
		m.log.Debug("dropping invalid fleet report", "err", err)
		return
	}
	if r.Origin == m.cfg.NodeID {
		m.metrics.fleetReports.WithLabelValues("self").Inc()
		return
	}
	if mem, ok := m.Member(r.Origin); !ok || mem.State != StateAlive {
		m.metrics.fleetReports.WithLabelValues("unknown_origin").Inc()
		return
	}
	now := time.Now()
	fs := m.fleet
	fs.mu.Lock()
	defer fs.mu.Unlock()
	o := fs.originLocked(r.Origin)
	o.heard = now
	for _, e := range r.Entries {
		if _, ok := o.keys[e.Key]; !ok && len(o.keys) >= maxFleetKeysPerRound {
			fs.pruneLocked(o)
			if len(o.keys) >= maxFleetKeysPerRound {
				continue
			}
		}
		o.keys[e.Key] = fleetEntry{backlog: e.Backlog, at: now}
	}
	m.metrics.fleetReports.WithLabelValues("received").Inc()
}

// pruneLocked forgets o's entries that can no longer count: o was heard
// for a TTL since without them (a silent origin's entries stay until the
// origin is forgotten).
func (fs *fleetState) pruneLocked(o *fleetOrigin) {
	for k, e := range o.keys {
		if o.heard.Sub(e.at) > fs.ttl {
			delete(o.keys, k)
		}
	}
}

// sweepFleet forgets what can no longer count (called by the worker's
// sweep; splitLocked forgets too, so the sweep only bounds memory).
func (m *Membership) sweepFleet(now time.Time) {
	fs := m.fleet
	fs.mu.Lock()
	defer fs.mu.Unlock()
	m.forgetLocked(now)
	for _, o := range fs.origins {
		fs.pruneLocked(o)
	}
}

// forgetLocked drops the nodes not heard for FleetSilentForget, unless
// this node hears no peer at all (none within hearWindow: an idle peer
// reports only every keepalive): cut off alone, it cannot tell its peers'
// death from its own isolation, and keeps its last-known set (so never
// takes the whole budget). A forgotten node counts again once heard.
// fs.mu held.
func (m *Membership) forgetLocked(now time.Time) {
	fs := m.fleet
	hears := false
	for id, o := range fs.origins {
		if id != m.cfg.NodeID && now.Sub(o.heard) <= fs.hearWindow {
			hears = true
			break
		}
	}
	if !hears {
		return
	}
	for id, o := range fs.origins {
		if id != m.cfg.NodeID && now.Sub(o.heard) > fs.forget {
			delete(fs.origins, id)
		}
	}
}

// FleetNodeShare is one node's part of a key's fleet budget as this node
// sees it.
type FleetNodeShare struct {
	Node    string  `json:"node"`
	Backlog int64   `json:"backlog"`
	Share   float64 `json:"share"`
	// Silent: the node had a backlog for the key but has not been heard
	// for a TTL (crashed, or on the other side of a partition); its share is
	// held back for it.
	Silent bool `json:"silent,omitempty"`
}

// fleetSplit is one key's set as this node sees it.
type fleetSplit struct {
	fresh  map[string]int64 // nodes heard with a backlog for the key
	silent []string         // nodes last heard with one, silent since
	sum    int64
}

// splitLocked builds k's set at now. fs.mu held.
func (m *Membership) splitLocked(k breakerpool.Key, now time.Time) fleetSplit {
	fs := m.fleet
	sp := fleetSplit{fresh: map[string]int64{}}
	m.forgetLocked(now)
	for id, o := range fs.origins {
		e, ok := o.keys[k]
		if !ok {
			continue
		}
		heard := id == m.cfg.NodeID || now.Sub(o.heard) <= fs.ttl
		// inLast: the key was in the origin's latest round (the messages of
		// one round arrive within a few ms of each other).
		inLast := o.heard.Sub(e.at) <= fs.interval/2
		switch {
		case !inLast:
			// its latest round came without the key: it left the key's set
		case id == m.cfg.NodeID:
			if b := fs.ownBacklogLocked(k, now); b > 0 { // else joining: its peers first
				sp.fresh[id] = b
				sp.sum += b
			}
		case heard:
			sp.fresh[id] = e.backlog
			sp.sum += e.backlog
		default:
			if mem, ok := m.Member(id); ok && mem.State == StateLeft {
				continue // a graceful leave is not a silence
			}
			sp.silent = append(sp.silent, id)
		}
	}
	return sp
}

// share is id's part of the budget: the fresh nodes share len(fresh) /
// (len(fresh) + len(silent)) of it by backlog; each silent node keeps an
// equal slot (which is what it takes itself if it is cut off alone).
func (sp fleetSplit) share(id string) float64 {
	b, ok := sp.fresh[id]
	if !ok || sp.sum <= 0 {
		return 0
	}
	n := float64(len(sp.fresh))
	return n / (n + float64(len(sp.silent))) * float64(b) / float64(sp.sum)
}

// FleetWarm reports whether this node has been in the cluster long enough
// to have heard its peers' reports: joined, and one TTL since. A node that
// has just started (or restarted) knows nothing of the other nodes' shares
// yet, not even how many there are, so it takes none of a budget until
// then.
func (m *Membership) FleetWarm() bool {
	fs := m.fleet
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.warmLocked(time.Now())
}

func (fs *fleetState) warmLocked(now time.Time) bool {
	return !fs.joinedAt.IsZero() && now.Sub(fs.joinedAt) >= fs.ttl
}

// FleetShare is this node's share, in [0, 1], of k's fleet budget. ok is
// false when no node (this one included) reports a backlog for k, or this
// node's backlog for k did not fit its last report: the caller then falls
// back to an equal split (0 while not FleetWarm). Before this node's own
// report reaches its peers (one FleetInterval, then FleetJoinDelay), and
// before it is FleetWarm, a key others report gives it 0.
func (m *Membership) FleetShare(k breakerpool.Key) (share float64, ok bool) {
	now := time.Now()
	fs := m.fleet
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, over := fs.overflow[k]; over {
		return 0, false
	}
	sp := m.splitLocked(k, now)
	if len(sp.fresh) == 0 && len(sp.silent) == 0 {
		return 0, false
	}
	if !fs.warmLocked(now) {
		return 0, true
	}
	return sp.share(m.cfg.NodeID), true
}

// FleetShares is every node's share of k's budget as this node sees it,
// sorted by node; silent nodes show the slot held back for them. Empty
// when nobody reports a backlog for k.
func (m *Membership) FleetShares(k breakerpool.Key) []FleetNodeShare {
	now := time.Now()
	fs := m.fleet
	fs.mu.Lock()
	sp := m.splitLocked(k, now)
	var out []FleetNodeShare
	for id, b := range sp.fresh {
		out = append(out, FleetNodeShare{Node: id, Backlog: b, Share: sp.share(id)})
	}
	total := float64(len(sp.fresh) + len(sp.silent))
	for _, id := range sp.silent {
		out = append(out, FleetNodeShare{Node: id, Backlog: fs.origins[id].keys[k].backlog, Share: 1 / total, Silent: true})
	}
	fs.mu.Unlock()
	slices.SortFunc(out, func(a, b FleetNodeShare) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
