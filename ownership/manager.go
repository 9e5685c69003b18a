package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// Manager is one node's shard ownership: the leader's placement loop (run
// through Store.OnLeader), the follower of the committed map, and the admin
// operations. Build it with New before the Raft store starts, then Start;
// Close stops it (idempotent).
type Manager struct {
	cfg     Config
	store   Store
	state   ShardState // the local replica's reads
	members Members
	log     *slog.Logger
	metrics *metrics

	holder shardmap.Holder

	// fresh latches whether this node's copy of the committed map is current
	// enough to act on: it turns on once the store has caught up with the
	// leader through a read barrier, and off when contact with the leader is
	// lost (a pause, a partition, a leader election) or at start. While it is
	// off the queue starts no call (Fresh, checked before each call) but
	// keeps its shards and lets calls in flight finish: a brief election
	// must not abandon them (that would only create duplicates; a real move
	// is fenced at completion and stops the shard through Watch). The
	// barrier on the way back means the map the queue then acts on includes
	// every move made meanwhile.
	fresh atomic.Bool
	// lastCheck is when the watch goroutine last checked freshness (Unix
	// nanoseconds). A long gap means this process was stopped or starved:
	// its map may be old even though the leader's heartbeats, buffered in
	// the socket, make contact look fine the moment it resumes.
	lastCheck atomic.Int64
	// overdue wakes the watch goroutine when Fresh finds the check overdue
	// (size 1: a burst of calls after a pause is one wake-up), so a resumed
	// process re-syncs at once instead of at its next tick.
	overdue chan struct{}
	// changed is closed (and replaced) whenever Owned may have changed; the
	// watch goroutine alone compares against lastOwned.
	chMu      sync.Mutex
	changed   chan struct{}
	lastOwned map[int]uint64

	// unfitLogged is the members fitMembers last left out, comma-joined
	// (leader loops of two terms may overlap for a moment).
	unfitLogged atomic.Pointer[string]

	// draining is set while Drain runs, so the watcher does not clear this
	// node's own shutdown drain flag underneath it.
	draining atomic.Bool
	// fixing guards the single in-flight write of this node's own draining
	// flag (misconfigured / restarted after a shutdown drain).
	fixing        atomic.Bool
	mismatchNoted atomic.Bool

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool
}

// New validates cfg and registers the leader's placement loop with
// store.OnLeader, so it must be called before the store starts. shards is
// the local replica's reads (the store's Reader). Nothing runs
// until Start (the placement loop runs only after Start, too).
func New(cfg Config, store Store, shards ShardState, members Members) (*Manager, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if store == nil || shards == nil || members == nil {
		return nil, errors.New("ownership: store, shard state and members are required")
	}
	m := &Manager{cfg: cfg, store: store, state: shards, members: members, log: cfg.Logger.With("component", "ownership"),
		changed: make(chan struct{}), overdue: make(chan struct{}, 1)}
	met, err := newMetrics(cfg.Registerer, m.unownedShards)
	if err != nil {
		return nil, err
	}
	m.metrics = met
	m.ctx, m.cancel = context.WithCancel(context.Background())
	store.OnLeader(m.runLeader)
	return m, nil
}

// Start starts following the committed shard map.
func (m *Manager) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return errors.New("ownership: Start after Close")
	case m.started:
		return errors.New("ownership: Start called twice")
	}
	m.started = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.watch()
	}()
	return nil
}

// Close stops the watcher and any leader work and waits for them. It does not
// drain; call Drain first for a graceful shutdown. Idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

// goOwned runs f in a goroutine that Close waits for; it reports false (and
// does not run f) once the manager is closed or before it started.
func (m *Manager) goOwned(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || !m.started {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// Holder is the committed shard map this node follows, for lock-free
// lookups on the hot path.
func (m *Manager) Holder() *shardmap.Holder { return &m.holder }

// Owned returns shard → epoch for every shard this node owns in the
// committed map. It is empty while the node is misconfigured (see Ready).
func (m *Manager) Owned() map[int]uint64 {
	return m.owned(m.holder.Load())
}

// Fresh reports whether this node works from its copy of the shard map (see
// the fresh field), checking contact with the leader at the moment of the
// call: the queue asks right before each call, so a node resumed after a
// pause makes none before the watch goroutine has even noticed. Finding the
// check overdue, it wakes that goroutine, which re-syncs at once. Contact is
// a known leader heard from within the store's ContactLag: a follower cut
// off stops calling then, not once raft gives the leader up (1–2 s lan).
// Such a lapse is not latched: unless raft lost the leader or the checks
// saw a gap (checkFresh), calls resume with the next contact, as they did
// before the bound for lapses raft did not report.
func (m *Manager) Fresh() bool {
	if !m.fresh.Load() || !m.store.InContact(m.store.ContactLag()) {
		return false
	}
	if time.Since(time.Unix(0, m.lastCheck.Load())) > m.store.FreshLag() {
		select {
		case m.overdue <- struct{}{}:
		default:
		}
		return false
	}
	return true
}

// Watch returns Owned together with a channel closed by the next change of
// the committed map (the queue's Ownership interface). Re-read after a
// wake-up; it is an edge, not a level.
func (m *Manager) Watch() (map[int]uint64, <-chan struct{}) {
	m.chMu.Lock()
	ch := m.changed // read before the state: a change after this closes ch
	m.chMu.Unlock()
	return m.Owned(), ch
}

// sync is the read barrier before trusting the local map again: everything
// committed before it (the maps that moved this node's shards away while it
// was gone) is applied locally when it succeeds.
func (m *Manager) sync() bool {
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Backstop)
	defer cancel()
	if err := m.store.Sync(ctx); err != nil {
		if m.ctx.Err() == nil {
			m.log.Debug("read barrier failed; still catching up", "err", err)
		}
		return false
	}
	return true
}

// checkFresh latches freshness; on catching up it re-reads the committed
// map. Only the watch goroutine calls it (each wake-up, and every
// freshPeriod). A check that finds a gap (this process was stopped) tries to
// catch up in the same call: the read barrier, not the leader's heartbeats
// buffered while stopped, is what makes the map current again, so there is
// no reason to wait for the next tick first.
func (m *Manager) checkFresh() {
	now := time.Now()
	gap := now.Sub(time.Unix(0, m.lastCheck.Swap(now.UnixNano())))
	fresh := m.fresh.Load()
	if fresh && (!m.store.InContact(0) || gap > m.store.FreshLag()) {
		m.log.Warn("lost contact with the raft leader (or this process was stopped); making no calls until caught up",
			"since_last_check", gap.Round(time.Millisecond))
		m.fresh.Store(false)
		fresh = false
	}
	if !fresh && m.store.CaughtUp(0) && m.sync() {
		if m.cfg.CaughtUp != nil {
			m.cfg.CaughtUp() // the node's derived views before its first call (Config.CaughtUp)
		}
		m.log.Info("caught up with the raft leader; working from the committed shard map")
		m.lastCheck.Store(time.Now().UnixNano()) // the barrier is the check: a slow one is no gap
		// The barrier may have brought a newer map: held before the node
		// counts as fresh, so OwnsAt answers from it at the first call.
		// (Fresh first, a restarted node's shards started from the map on
		// its disk made calls for shards it no longer owned in the gap.)
		m.refresh()
		m.fresh.Store(true)
	}
}

// publishOwned wakes watchers when the owned set changed. Owned follows
// the held map and the committed shard count, which change only in
// refresh, so refresh alone calls it (not every FreshCheck: reading the
// shard count and building the set was a tenth of an idle node's CPU).
func (m *Manager) publishOwned() {
	owned := m.Owned()
	if maps.Equal(owned, m.lastOwned) && m.lastOwned != nil {
		return
	}
	m.lastOwned = owned
	m.metrics.owned.Set(float64(len(owned)))
	m.chMu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.chMu.Unlock()
}

func (m *Manager) owned(sm *shardmap.Map) map[int]uint64 {
	out := make(map[int]uint64)
	if sm == nil || m.mismatch() {
		return out
	}
	for _, s := range sm.OwnedBy(m.cfg.NodeID) {
		out[s] = sm.Shards[s].Epoch
	}
	return out
}

// OwnsAt implements queue.EpochOwnership: whether this node owns shard at
// epoch in the map it holds. The queue asks before each call.
func (m *Manager) OwnsAt(shard int, epoch uint64) bool {
	sm := m.holder.Load()
	if sm == nil {
		return false
	}
	a, ok := sm.Owner(shard)
	return ok && a.Owner == m.cfg.NodeID && a.Epoch == epoch
}

// CheckEpoch refuses, with a *shardmap.WrongOwnerError, work on shard at
// epoch unless this node owns it at that epoch in the committed map.
func (m *Manager) CheckEpoch(shard int, epoch uint64) error {
	return shardmap.CheckEpoch(m.holder.Load(), shard, m.cfg.NodeID, epoch)
}

func (m *Manager) mismatch() bool {
	n := m.state.ShardCount()
	return n != 0 && n != m.cfg.Shards
}

// Ready reports whether the node can take part in shard ownership: the
// cluster's shard count is known and equals this node's --shards, and a
// shard map has been committed and seen here. reason says what is missing.
func (m *Manager) Ready() (ready bool, reason string) {
	n := m.state.ShardCount()
	switch {
	case n == 0:
		return false, "waiting for the cluster's shard count to be committed"
	case n != m.cfg.Shards:
		return false, mismatchMessage(n, m.cfg.Shards)
	case m.holder.Load() == nil:
		return false, "waiting for the first committed shard map"
	case !m.fresh.Load():
		return false, "catching up with the raft leader"
	}
	return true, ""
}

func mismatchMessage(cluster, flag int) string {
	return fmt.Sprintf("this cluster was created with %d shards; --shards %d cannot change it (restart with --shards %d)", cluster, flag, cluster)
}

// watch follows the committed map into the holder, and keeps this node's own
// draining flag right, until Close.
func (m *Manager) watch() {
	wake, unsub := m.state.Subscribe(state.TableMeta)
	defer unsub()
	t := time.NewTicker(m.cfg.Backstop)
	defer t.Stop()
	fresh := time.NewTicker(m.cfg.FreshCheck)
	defer fresh.Stop()
	period := m.cfg.FreshCheck
	m.refresh()
	for {
		m.checkFresh()
		if p := m.freshPeriod(); p != period {
			fresh.Reset(p)
			period = p
		}
		select {
		case <-m.ctx.Done():
			return
		case <-wake:
			m.refresh()
		case <-t.C:
			m.refresh()
		case <-fresh.C:
		case <-m.overdue:
		}
	}
}

// freshPeriod is how often checkFresh runs: every FreshCheck while
// catching up, so that calls resume soon after, and FreshLag/4 (if longer)
// while fresh. A fresh node's tick only has to notice a pause (a gap over
// FreshLag) and a lost leader, which raft itself reports only after a
// heartbeat timeout (FreshLag/2) and the leader needs far longer to move
// shards for; Fresh checks contact on every call meanwhile. Each wake-up
// of an idle process costs CPU, and this was 20 a second on every node.
func (m *Manager) freshPeriod() time.Duration {
	if m.fresh.Load() {
		return max(m.cfg.FreshCheck, m.store.FreshLag()/4)
	}
	return m.cfg.FreshCheck
}

func (m *Manager) refresh() {
	if sm := m.state.ShardMap(); sm != nil {
		before := m.holder.Load()
		stored, err := m.holder.Store(sm)
		if err != nil {
			m.log.Error("committed shard map is malformed; keeping the previous one", "version", sm.Version, "err", err)
		} else if stored {
			m.metrics.version.Set(float64(sm.Version))
			m.logChanges(before, sm)
		}
	}
	m.fixSelfFlag()
	m.publishOwned()
}

// logChanges logs the shards this node gained and lost with a new map.
func (m *Manager) logChanges(before, after *shardmap.Map) {
	self := m.cfg.NodeID
	var gained, lost []int
	for i, a := range after.Shards {
		was := before != nil && before.Shards[i].Owner == self
		switch {
		case a.Owner == self && (!was || before.Shards[i].Epoch != a.Epoch):
			gained = append(gained, i)
		case a.Owner != self && was:
			lost = append(lost, i)
		}
	}
	if len(gained)+len(lost) > 0 {
		m.log.Info("shard ownership changed", "version", after.Version, "acquired", gained, "released", lost)
	}
}

// fixSelfFlag excludes a misconfigured node from placement, and brings a
// node that drained for shutdown (or was misconfigured) back once it runs
// with the cluster's shard count. An operator's drain is left alone.
func (m *Manager) fixSelfFlag() {
	n := m.state.ShardCount()
	if n == 0 {
		return
	}
	var flag *state.DrainingNode
	for _, d := range m.state.DrainingNodes() {
		if d.Node == m.cfg.NodeID {
			flag = &d
			break
		}
	}
	var want *state.SetDrainingNodeCommand
	switch {
	case n != m.cfg.Shards:
		if m.mismatchNoted.CompareAndSwap(false, true) {
			m.log.Error("node is not ready: "+mismatchMessage(n, m.cfg.Shards), "cluster_shards", n, "flag_shards", m.cfg.Shards)
		}
		if flag == nil {
			want = &state.SetDrainingNodeCommand{Node: m.cfg.NodeID, Draining: true, Reason: state.DrainMisconfigured}
		}
	case flag != nil && flag.Reason != state.DrainOperator && !m.draining.Load():
		want = &state.SetDrainingNodeCommand{Node: m.cfg.NodeID, Draining: false}
	}
	if want == nil || !m.fixing.CompareAndSwap(false, true) {
		return
	}
	if !m.goOwned(func() {
		defer m.fixing.Store(false)
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		defer cancel()
		want.Author = "node:" + m.cfg.NodeID
		if _, err := m.store.SetDrainingNode(ctx, *want); err != nil {
			m.log.Warn("updating this node's draining flag failed; will retry", "draining", want.Draining, "err", err)
			return
		}
		m.log.Info("updated this node's draining flag", "draining", want.Draining, "reason", want.Reason)
	}) {
		m.fixing.Store(false)
	}
}
