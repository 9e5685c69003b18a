// Package cluster is fusebox's gossip layer: memberlist membership with node
// metadata, and the transport of breaker hints between peers.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrNotStarted is returned by methods that need a running memberlist.
var ErrNotStarted = errors.New("cluster: membership not started")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("cluster: membership closed")

// Lifecycle phases, readable without the lifecycle mutex (Close holds it
// while waiting for the leave broadcast; Publish must not wait for that).
const (
	phaseNew int32 = iota
	phaseRunning
	phaseClosed
)

// Membership is one node's view of the cluster. Create with New, then
// Start; Close leaves and shuts down.
type Membership struct {
	cfg     Config
	t       timings
	log     *slog.Logger
	metrics *metrics
	table   *memberTable
	hints   *hintState
	fleet   *fleetState
	queue   *memberlist.TransmitLimitedQueue
	keyring *memberlist.Keyring // nil without encryption

	metaMu    sync.Mutex // serialises UpdateMeta
	meta      Meta       // guarded by metaMu
	metaBytes atomic.Pointer[[]byte]
	// clusterID is meta.ClusterID, read without metaMu by the alive and
	// merge delegates (foreign.go), which run under memberlist's locks.
	clusterID  atomic.Pointer[string]
	foreignLog foreignLog

	inbound chan inbound
	direct  chan []byte // encoded user messages to send to every peer

	ml    atomic.Pointer[memberlist.Memberlist]
	bound atomic.Pointer[string] // the gossip listener's bound address (BoundAddr)
	// advertised is the local node's gossip address, read once at Start
	// (GossipAddr): memberlist's LocalNode fields are rewritten by
	// UpdateNode under its own lock, which a reader cannot take.
	advertised atomic.Pointer[string]
	joined     atomic.Bool
	joinedCh   chan struct{}
	stop       chan struct{}
	wg         sync.WaitGroup

	phase      atomic.Int32 // phaseNew, phaseRunning, phaseClosed: read without mu
	mu         sync.Mutex   // lifecycle
	started    bool
	closed     bool
	left       bool
	joinCancel context.CancelFunc
}

// New validates cfg and builds a Membership; nothing touches the network
// until Start. logger nil discards logs; reg nil skips metric registration.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Membership, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("node", cfg.NodeID)
	met, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	t := cfg.timings()
	m := &Membership{
		cfg: cfg, t: t, log: logger, metrics: met,
		table:    newMemberTable(cfg.NodeID, logger, met, t.leaveIntentTTL, cfg.RetainDeparted),
		meta:     cfg.Meta,
		inbound:  make(chan inbound, cfg.InboundQueue),
		direct:   make(chan []byte, 1024),
		joinedCh: make(chan struct{}),
		stop:     make(chan struct{}),
	}
	m.hints = newHintState(cfg)
	m.fleet = newFleetState(cfg)
	b, _ := cfg.Meta.encode() // validated by withDefaults
	m.metaBytes.Store(&b)
	cid := cfg.Meta.ClusterID
	m.clusterID.Store(&cid)
	m.queue = &memberlist.TransmitLimitedQueue{
		NumNodes:       func() int { return max(1, m.table.snap.Load().alive) },
		RetransmitMult: memberlist.DefaultLANConfig().RetransmitMult,
	}
	return m, nil
}

// Start creates the memberlist (binding the gossip port) and starts joining
// the seeds in the background; it does not wait for the join (see Joined,
// WaitJoined). Joining stops when ctx ends or on Leave/Close.
func (m *Membership) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.started {
		return errors.New("cluster: Start called twice")
	}
	mc, err := m.cfg.memberlistConfig()
	if err != nil {
		return err
	}
	m.keyring = mc.Keyring
	d := &delegate{m: m}
	mc.Delegate = d
	mc.Alive = d // foreign.go
	mc.Merge = d
	mc.Events = m.table
	mc.Logger = newMemberlistLogger(m.log)
	tr, err := newPacketTransport(mc.BindAddr, mc.BindPort, mc.Logger)
	if err != nil {
		return fmt.Errorf("cluster: starting memberlist on %s: %w", m.cfg.BindAddr, err)
	}
	// memberlist reads BindPort and AdvertisePort beyond the transport (its
	// join default, the port in its alive and ping messages); with its own
	// transport it fills them in, with ours it must be told.
	if mc.BindPort == 0 {
		mc.BindPort = tr.Port()
	}
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = tr.Port()
	}
	mc.Transport = tr
	bound := tr.tcp.Addr().String()
	m.bound.Store(&bound)
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = tr.Shutdown()
		return fmt.Errorf("cluster: starting memberlist on %s: %w", m.cfg.BindAddr, err)
	}
	addr := ml.LocalNode().Address() // before anything can call UpdateNode
	m.advertised.Store(&addr)
	m.ml.Store(ml)
	m.started = true
	m.phase.Store(phaseRunning)
	m.log.Info("gossip started", "addr", m.GossipAddr(), "encrypted", len(m.cfg.Keys) > 0, "preset", string(m.cfg.Preset))

	if len(m.joinAddrs()) == 0 {
		m.markJoined() // no seeds but itself: this node starts a cluster
	}
	jctx, cancel := context.WithCancel(ctx)
	m.joinCancel = cancel
	m.wg.Add(4)
	go func() { defer m.wg.Done(); m.joinLoop(jctx) }()
	go func() { defer m.wg.Done(); m.workerLoop() }()
	go func() { defer m.wg.Done(); m.senderLoop() }()
	go func() { defer m.wg.Done(); m.fleetLoop() }()
	return nil
}

// Leave announces a graceful departure and waits up to timeout for the
// broadcast; peers then report this node as StateLeft. The node keeps
// answering gossip until Close. Leave is safe to call more than once.
func (m *Membership) Leave(timeout time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaveLocked(timeout)
}

func (m *Membership) leaveLocked(timeout time.Duration) error {
	if !m.started {
		return ErrNotStarted
	}
	if m.left {
		return nil
	}
	m.left = true
	m.joinCancel()
	ml := m.ml.Load()
	// The intent tells peers the coming "dead" message means left, not
	// failed; it goes straight to every peer and into the gossip queue.
	m.table.leaveIntent(m.cfg.NodeID)
	intent := encodeLeaveIntent(m.cfg.NodeID)
	for _, p := range m.table.snap.Load().peers {
		_ = ml.SendBestEffort(p, intent)
	}
	m.queue.QueueBroadcast(&broadcast{name: "leave\x00" + m.cfg.NodeID, msg: intent})
	if err := ml.Leave(timeout); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	m.log.Info("left the cluster")
	return nil
}

// Close leaves the cluster (if Leave was not called), shuts memberlist down
// and stops every goroutine. Subscriber channels are closed. Close is
// idempotent.
func (m *Membership) Close() error { return m.close(true) }

// Shutdown stops the node without a graceful leave, as a crash would: peers
// find out through failure detection and see it dead, not left. Tests use
// it to simulate SIGKILL in process. Idempotent, like Close.
func (m *Membership) Shutdown() error { return m.close(false) }

func (m *Membership) close(leave bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.phase.Store(phaseClosed)
	var errs []error
	if m.started {
		if leave {
			// A leave that times out (peers already gone, or shutting down
			// together) is not a failed shutdown: peers will see this node
			// dead instead of left, and reap it.
			if err := m.leaveLocked(m.cfg.LeaveTimeout); err != nil {
				m.log.Warn("graceful leave did not complete; peers will detect the node as failed", "err", err)
			}
		} else {
			m.left = true
			m.joinCancel()
		}
		if err := m.ml.Load().Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("cluster: shutdown: %w", err))
		}
		close(m.stop)
		m.wg.Wait()
	}
	m.table.closeSubs()
	return errors.Join(errs...)
}

// GossipAddr returns the advertised gossip address (host:port) once
// started, with the real port when BindAddr asked for port 0.
func (m *Membership) GossipAddr() string {
	if a := m.advertised.Load(); a != nil {
		return *a
	}
	return ""
}

// BoundAddr returns the address the gossip listener is bound to once
// started (0.0.0.0:PORT for a wildcard bind), which GossipAddr does not
// show when an address is advertised; "" before Start.
func (m *Membership) BoundAddr() string {
	if b := m.bound.Load(); b != nil {
		return *b
	}
	return ""
}

// NodeID returns this node's ID.
func (m *Membership) NodeID() string { return m.cfg.NodeID }

// Joined reports whether a join has succeeded (always true for a node
// configured without seeds).
func (m *Membership) Joined() bool { return m.joined.Load() }

// WaitJoined blocks until Joined or ctx ends.
func (m *Membership) WaitJoined(ctx context.Context) error {
	select {
	case <-m.joinedCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Membership) markJoined() {
	if m.joined.CompareAndSwap(false, true) {
		close(m.joinedCh)
	}
}

// Members returns every known member, sorted by ID: alive ones and, for
// RetainDeparted, dead (failed) and left ones. The slice is a copy.
func (m *Membership) Members() []Member {
	return append([]Member(nil), m.table.snap.Load().members...)
}

// Member returns the member with the given ID.
func (m *Membership) Member(id string) (Member, bool) {
	s := m.table.snap.Load()
	i, ok := s.index[id]
	if !ok {
		return Member{}, false
	}
	return s.members[i], true
}

// LocalMember returns this node as peers see it.
func (m *Membership) LocalMember() Member {
	if mem, ok := m.Member(m.cfg.NodeID); ok {
		return mem
	}
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return Member{ID: m.cfg.NodeID, Meta: m.meta, State: StateAlive}
}

// Generation changes whenever what Members returns may have: a caller
// that derives something from the members can keep it while Generation
// stays the same (read Generation first, then Members).
func (m *Membership) Generation() uint64 { return m.table.snap.Load().gen }

// NumAlive returns how many members are alive, this node included.
func (m *Membership) NumAlive() int { return m.table.snap.Load().alive }

// Subscribe returns a channel that receives a value after membership
// changes (join, leave, failure, metadata update). Wake-ups coalesce: re-read
// Members() when woken. The channel is closed by cancel and by Close.
func (m *Membership) Subscribe() (<-chan struct{}, func()) { return m.table.subscribe() }

// ClusterID is the cluster id this node advertises ("" while it has none).
func (m *Membership) ClusterID() string { return *m.clusterID.Load() }

// UpdateMeta applies fn to a copy of this node's metadata, validates it and
// gossips it (memberlist UpdateNode). The ID cannot change. The new metadata
// is in effect locally even if the broadcast times out.
func (m *Membership) UpdateMeta(fn func(*Meta)) error {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	next := m.meta
	fn(&next)
	if next.ID != m.cfg.NodeID {
		return fmt.Errorf("cluster: UpdateMeta: Meta.ID cannot change (%q -> %q)", m.cfg.NodeID, next.ID)
	}
	b, err := next.encode()
	if err != nil {
		return fmt.Errorf("cluster: UpdateMeta: %w", err)
	}
	m.meta = next
	m.metaBytes.Store(&b)
	cid := next.ClusterID
	m.clusterID.Store(&cid)
	m.mu.Lock()
	closed, ml := m.closed, m.ml.Load()
	m.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if ml == nil {
		return nil // advertised at Start
	}
	// Wait (bounded) for a peer to take the update without holding m.mu, so
	// Close is never held up by it; memberlist is safe to use concurrently
	// with its own Shutdown, and push/pull carries the update anyway.
	if err := ml.UpdateNode(m.cfg.LeaveTimeout); err != nil {
		return fmt.Errorf("cluster: UpdateMeta: %w", err)
	}
	return nil
}
