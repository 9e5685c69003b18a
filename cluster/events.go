package cluster

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// record is one member as the table holds it.
type record struct {
	member Member
	node   memberlist.Node // Name, Addr, Port: enough for SendBestEffort
}

// snapshot is an immutable view of the members, swapped in after every
// event.
type snapshot struct {
	members []Member // sorted by ID
	index   map[string]int
	peers   []*memberlist.Node // alive members other than self
	alive   int                // alive members including self
	failed  []string           // gossip addresses of dead (not left) members
	gen     uint64             // one more than the snapshot it replaced
}

// memberTable implements memberlist.EventDelegate. memberlist calls it with
// its node lock held, one event at a time: it never calls back into
// memberlist and never blocks (subscribers are woken with non-blocking sends
// on channels of size 1).
type memberTable struct {
	self     string
	log      *slog.Logger
	metrics  *metrics
	intentTT time.Duration // how long a leave intent is remembered
	retain   time.Duration // how long departed members are kept
	now      func() time.Time

	mu      sync.Mutex
	records map[string]*record
	leaving map[string]time.Time // node ID -> when its leave intent arrived

	snap atomic.Pointer[snapshot]

	subMu  sync.Mutex
	subs   map[uint64]chan struct{}
	nextID uint64
	closed bool
}

func newMemberTable(self string, log *slog.Logger, m *metrics, intentTTL, retain time.Duration) *memberTable {
	t := &memberTable{
		self: self, log: log, metrics: m, intentTT: intentTTL, retain: retain, now: time.Now,
		records: make(map[string]*record),
		leaving: make(map[string]time.Time),
		subs:    make(map[uint64]chan struct{}),
	}
	t.snap.Store(&snapshot{index: map[string]int{}})
	return t
}

func (t *memberTable) NotifyJoin(n *memberlist.Node)   { t.upsert(n, "join") }
func (t *memberTable) NotifyUpdate(n *memberlist.Node) { t.upsert(n, "update") }

func (t *memberTable) NotifyLeave(n *memberlist.Node) {
	t.metrics.events.WithLabelValues("leave").Inc()
	t.mu.Lock()
	now := t.now()
	state := StateDead
	if at, ok := t.leaving[n.Name]; ok && now.Sub(at) < t.intentTT {
		state = StateLeft
	}
	r := t.recordFor(n)
	r.member.State = state
	r.member.StateChanged = now
	t.publishLocked()
	t.mu.Unlock()
	t.log.Info("member departed", "member", n.Name, "state", state.String())
	t.notify()
}

func (t *memberTable) upsert(n *memberlist.Node, event string) {
	t.metrics.events.WithLabelValues(event).Inc()
	t.mu.Lock()
	r := t.recordFor(n)
	if r.member.State != StateAlive || r.member.StateChanged.IsZero() {
		r.member.StateChanged = t.now()
	}
	r.member.State = StateAlive
	if event == "join" {
		delete(t.leaving, n.Name) // a rejoin supersedes an earlier leave
	}
	t.publishLocked()
	t.mu.Unlock()
	if event == "join" && n.Name != t.self {
		t.log.Info("member joined", "member", n.Name, "addr", n.Address())
	}
	t.notify()
}

// recordFor updates (or creates) the record for n from memberlist's copy.
func (t *memberTable) recordFor(n *memberlist.Node) *record {
	r := t.records[n.Name]
	if r == nil {
		r = &record{}
		t.records[n.Name] = r
	}
	r.node = memberlist.Node{Name: n.Name, Addr: slices.Clone(n.Addr), Port: n.Port}
	r.member.ID = n.Name
	r.member.GossipAddr = n.Address()
	meta, err := decodeMeta(n.Meta)
	if err == nil && meta.ID != n.Name {
		err = fmt.Errorf("metadata ID %q differs from the node name", meta.ID)
	}
	if err != nil {
		t.log.Warn("ignoring malformed member metadata", "member", n.Name, "err", err)
		t.metrics.msgsDropped.WithLabelValues("bad_metadata").Inc()
		meta = Meta{ID: n.Name}
	}
	r.member.Meta = meta
	return r
}

// leaveIntent records that id announced it is leaving. It reports whether the
// intent is new (to be re-gossiped). A member already marked dead becomes
// left: the intent and the dead message race through gossip.
func (t *memberTable) leaveIntent(id string) (fresh bool) {
	t.mu.Lock()
	now := t.now()
	if at, ok := t.leaving[id]; ok && now.Sub(at) < t.intentTT {
		t.mu.Unlock()
		return false
	}
	t.leaving[id] = now
	changed := false
	if r := t.records[id]; r != nil && r.member.State == StateDead {
		r.member.State = StateLeft
		r.member.StateChanged = now
		changed = true
		t.publishLocked()
	}
	t.mu.Unlock()
	if changed {
		t.notify()
	}
	return true
}

// reap forgets departed members older than retain and expired intents.
func (t *memberTable) reap() {
	t.mu.Lock()
	now := t.now()
	changed := false
	for id, r := range t.records {
		if (r.member.State == StateDead || r.member.State == StateLeft) && now.Sub(r.member.StateChanged) >= t.retain {
			delete(t.records, id)
			changed = true
		}
	}
	for id, at := range t.leaving {
		if now.Sub(at) >= t.intentTT {
			delete(t.leaving, id)
		}
	}
	if changed {
		t.publishLocked()
	}
	t.mu.Unlock()
	if changed {
		t.notify()
	}
}

// publishLocked builds and stores a new snapshot and updates the gauges.
func (t *memberTable) publishLocked() {
	s := &snapshot{
		members: make([]Member, 0, len(t.records)),
		index:   make(map[string]int, len(t.records)),
		gen:     t.snap.Load().gen + 1,
	}
	counts := map[MemberState]int{}
	for _, r := range t.records {
		s.members = append(s.members, r.member)
		counts[r.member.State]++
		switch r.member.State {
		case StateAlive:
			s.alive++
			if r.member.ID != t.self {
				n := r.node
				s.peers = append(s.peers, &n)
			}
		case StateDead:
			s.failed = append(s.failed, r.member.GossipAddr)
		}
	}
	slices.SortFunc(s.members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	for i, m := range s.members {
		s.index[m.ID] = i
	}
	t.snap.Store(s)
	for _, st := range []MemberState{StateAlive, StateSuspect, StateDead, StateLeft} {
		t.metrics.members.WithLabelValues(st.String()).Set(float64(counts[st]))
	}
}

func (t *memberTable) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	t.subMu.Lock()
	defer t.subMu.Unlock()
	if t.closed {
		close(ch)
		return ch, func() {}
	}
	id := t.nextID
	t.nextID++
	t.subs[id] = ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			t.subMu.Lock()
			defer t.subMu.Unlock()
			if c, ok := t.subs[id]; ok {
				delete(t.subs, id)
				close(c)
			}
		})
	}
}

// notify wakes every subscriber without blocking: a pending wake-up absorbs
// the new one.
func (t *memberTable) notify() {
	t.subMu.Lock()
	defer t.subMu.Unlock()
	for _, ch := range t.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// closeSubs closes every subscriber channel: membership has ended.
func (t *memberTable) closeSubs() {
	t.subMu.Lock()
	defer t.subMu.Unlock()
	t.closed = true
	for id, ch := range t.subs {
		delete(t.subs, id)
		close(ch)
	}
}
