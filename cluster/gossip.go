package cluster

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"fusebox/breakerpool"
)

// Bounds on the receive-side tables; past them an arbitrary entry is
// evicted (the sink keeps its own per-key generation, so forgetting one
// only costs a redundant delivery).
const (
	maxSeenEntries  = 1 << 16
	maxRateLimiters = 4096
	sweepInterval   = 5 * time.Second
)

type seenKey struct {
	key    breakerpool.Key
	origin string
}

type handlers struct {
	sink   HintSink
	source HintSource
}

// hintState holds the dedup table, the per-origin limiters and the queued
// gossip broadcasts by name. mu is taken before the broadcast queue's lock,
// never after it.
type hintState struct {
	rateLimit rate.Limit
	burst     int
	handlers  atomic.Pointer[handlers]

	mu       sync.Mutex
	seen     map[seenKey]uint64
	limiters map[string]*rate.Limiter
	queued   map[string]*broadcast
}

func newHintState(cfg Config) *hintState {
	hs := &hintState{
		rateLimit: cfg.HintRate, burst: cfg.HintBurst,
		seen:     make(map[seenKey]uint64),
		limiters: make(map[string]*rate.Limiter),
		queued:   make(map[string]*broadcast),
	}
	hs.handlers.Store(&handlers{})
	return hs
}

// SetHintHandlers installs the consumer of peers' hints and the source of
// this node's open hints for anti-entropy. Either may be nil. Hints that
// arrive with no sink are counted as "nosink" and dropped. Safe at any time.
func (m *Membership) SetHintHandlers(sink HintSink, source HintSource) {
	m.hints.handlers.Store(&handlers{sink: sink, source: source})
}

// Publish announces a local breaker transition. h.Origin is set to this
// node's ID. The hint is queued for gossip at once (replacing a queued older
// generation of the same key) and handed to a sender goroutine that sends it
// directly to every live peer over UDP; Publish never blocks on the network.
// It fails only for an invalid hint or a membership that is not running.
func (m *Membership) Publish(h Hint) error {
	h.Origin = m.cfg.NodeID
	enc, err := EncodeHint(h)
	if err != nil {
		return err
	}
	switch m.phase.Load() {
	case phaseNew:
		return ErrNotStarted
	case phaseClosed:
		return ErrClosed
	}
	msg := append([]byte{msgHint}, enc...)
	m.queueHint(h, msg)
	select {
	case m.direct <- msg:
	default:
		m.metrics.sendErrors.Inc() // gossip still carries it
	}
	return nil
}

// maxQueuedBroadcasts bounds the gossip queue (hints and leave intents).
const maxQueuedBroadcasts = 4096

// queueHint queues msg for gossip under the key's name unless a newer
// generation of the key is already queued.
func (m *Membership) queueHint(h Hint, msg []byte) {
	name := broadcastName(h.Key)
	hs := m.hints
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if old := hs.queued[name]; old != nil && !old.done.Load() && old.gen > h.Generation {
		return
	}
	b := &broadcast{name: name, gen: h.Generation, msg: msg}
	hs.queued[name] = b
	m.queue.QueueBroadcast(b)
	if m.queue.NumQueued() > maxQueuedBroadcasts {
		// The oldest go (finished, so sweepQueued forgets them): a hint
		// also travels by direct send and push/pull, and a flood of keys
		// must not grow the queue without end.
		m.queue.Prune(maxQueuedBroadcasts)
	}
	m.metrics.hintsSent.WithLabelValues("gossip").Inc()
}

// broadcastName is unambiguous for any key: each part is length-prefixed.
func broadcastName(k breakerpool.Key) string {
	return "hint\x00" + strconv.Itoa(len(k.TaskGroup)) + ":" + k.TaskGroup +
		strconv.Itoa(len(k.NamespaceID)) + ":" + k.NamespaceID + k.Destination
}

// markSeenLocked records gen for k, evicting an arbitrary entry when full.
func (hs *hintState) markSeenLocked(k seenKey, gen uint64) {
	if _, ok := hs.seen[k]; !ok && len(hs.seen) >= maxSeenEntries {
		for victim := range hs.seen {
			delete(hs.seen, victim)
			break
		}
	}
	hs.seen[k] = gen
}

// allowLocked applies origin's rate limit.
func (hs *hintState) allowLocked(origin string) bool {
	l := hs.limiters[origin]
	if l == nil {
		if len(hs.limiters) >= maxRateLimiters {
			for victim := range hs.limiters {
				delete(hs.limiters, victim)
				break
			}
		}
		l = rate.NewLimiter(hs.rateLimit, hs.burst)
		hs.limiters[origin] = l
	}
	return l.Allow()
}

// receiveHint classifies one encoded hint from a peer, hands it to the sink
// and re-gossips it the first time. viaPushPull skips the rate limit (the
// batch is bounded) and the re-gossip (anti-entropy converges pairwise).
func (m *Membership) receiveHint(enc []byte, viaPushPull bool) HintResult {
	h, err := DecodeHint(enc)
	if err != nil {
		m.metrics.hintsReceived.WithLabelValues(string(HintInvalid)).Inc()
		m.log.Debug("dropping invalid hint", "err", err)
		return HintInvalid
	}
	res := m.classify(h, viaPushPull)
	if res == HintApplied && !viaPushPull {
		m.queueHint(h, append([]byte{msgHint}, enc...))
	}
	m.metrics.hintsReceived.WithLabelValues(string(res)).Inc()
	if obs := m.cfg.HintObserver; obs != nil {
		obs(h, res)
	}
	return res
}

func (m *Membership) classify(h Hint, viaPushPull bool) HintResult {
	if h.Origin == m.cfg.NodeID {
		return HintSelf
	}
	if !viaPushPull {
		if mem, ok := m.Member(h.Origin); !ok || (mem.State != StateAlive && mem.State != StateSuspect) {
			return HintUnknownOrigin
		}
	}
	hs := m.hints
	hs.mu.Lock()
	if !viaPushPull && !hs.allowLocked(h.Origin) {
		hs.mu.Unlock()
		return HintRateLimited
	}
	k := seenKey{h.Key, h.Origin}
	if gen, ok := hs.seen[k]; ok {
		if h.Generation < gen {
			hs.mu.Unlock()
			return HintStale
		}
		if h.Generation == gen {
			hs.mu.Unlock()
			return HintDuplicate
		}
	}
	sink := hs.handlers.Load().sink
	if sink == nil {
		hs.mu.Unlock()
		return HintNoSink // not marked seen: a later copy can still be delivered
	}
	hs.markSeenLocked(k, h.Generation)
	hs.mu.Unlock()
	if sink.HandleHint(h) {
		return HintApplied
	}
	return HintIgnored
}

// workerLoop drains the inbound queue and sweeps the tables.
func (m *Membership) workerLoop() {
	sweep := time.NewTicker(min(sweepInterval, m.t.reconnect))
	defer sweep.Stop()
	for {
		select {
		case <-m.stop:
			return
		case msg := <-m.inbound:
			m.handleInbound(msg)
		case <-sweep.C:
			m.table.reap()
			m.hints.sweepQueued()
			m.sweepFleet(time.Now())
		}
	}
}

func (m *Membership) handleInbound(msg inbound) {
	switch msg.typ {
	case msgHint:
		m.receiveHint(msg.body, false)
	case msgFleet:
		m.receiveFleetReport(msg.body)
	case msgLeaveIntent:
		id, err := decodeLeaveIntent(msg.body)
		if err != nil {
			m.metrics.msgsDropped.WithLabelValues("bad_leave_intent").Inc()
			return
		}
		if _, known := m.Member(id); !known { // made-up ids were remembered and re-gossiped
			m.metrics.msgsDropped.WithLabelValues("bad_leave_intent").Inc()
			return
		}
		if id != m.cfg.NodeID && m.table.leaveIntent(id) {
			m.queue.QueueBroadcast(&broadcast{name: "leave\x00" + id, msg: append([]byte{msgLeaveIntent}, msg.body...)})
		}
	}
}

// sweepQueued forgets broadcasts memberlist has finished with.
func (hs *hintState) sweepQueued() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for name, b := range hs.queued {
		if b.done.Load() {
			delete(hs.queued, name)
		}
	}
}

// senderLoop sends published hints directly to every live peer.
func (m *Membership) senderLoop() {
	for {
		select {
		case <-m.stop:
			return
		case msg := <-m.direct:
			ml := m.ml.Load()
			for _, p := range m.table.snap.Load().peers {
				if err := ml.SendBestEffort(p, msg); err != nil {
					m.metrics.sendErrors.Inc()
					m.log.Debug("direct hint send failed", "peer", p.Name, "err", err)
					continue
				}
				m.metrics.hintsSent.WithLabelValues("direct").Inc()
			}
		}
	}
}

// localHintState encodes the source's open hints for push/pull, newest
// generation first, up to maxHintBatchBytes.
func (m *Membership) localHintState() []byte {
	src := m.hints.handlers.Load().source
	if src == nil {
		return nil
	}
	hints := src.OpenHints()
	sortNewestFirst(hints)
	encs := make([][]byte, 0, len(hints))
	for _, h := range hints {
		if h.State == HintClosed {
			continue
		}
		if h.Origin == "" {
			h.Origin = m.cfg.NodeID
		}
		enc, err := EncodeHint(h)
		if err != nil {
			m.log.Warn("skipping unencodable open hint", "key", h.Key.String(), "err", err)
			continue
		}
		encs = append(encs, enc)
	}
	if len(encs) == 0 {
		return nil
	}
	batch, n := encodeHintBatch(encs, maxHintBatchBytes)
	if n < len(encs) {
		m.log.Warn("push/pull hint state truncated", "kept", n, "open", len(encs))
	}
	m.metrics.stateHints.WithLabelValues("sent").Add(float64(n))
	return batch
}

// mergeHintState feeds a peer's open hints to the sink.
func (m *Membership) mergeHintState(buf []byte) {
	encs, err := decodeHintBatch(buf)
	if err != nil {
		m.metrics.hintsReceived.WithLabelValues(string(HintInvalid)).Inc()
		m.log.Debug("dropping invalid push/pull hint state", "err", err)
		return
	}
	m.metrics.stateHints.WithLabelValues("received").Add(float64(len(encs)))
	for _, enc := range encs {
		m.receiveHint(enc, true)
	}
}

// sortNewestFirst orders hints by descending generation.
func sortNewestFirst(hints []Hint) {
	slices.SortFunc(hints, func(a, b Hint) int { return cmp.Compare(b.Generation, a.Generation) })
}
