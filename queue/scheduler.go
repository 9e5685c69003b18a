package queue

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"fusebox/breakerpool"
)

// item is one dispatch of a task: it lives from the reader's Due until its
// result is written (or it is released).
type item struct {
	task Task
	sh   *shard
	// key is KeyOf(&task), derived once: a task a full buffer refuses is
	// offered again at every room signal, and each offer is keyed.
	key breakerpool.Key
	// resubmitted is set after the one immediate resubmit that follows a
	// first breaker rejection.
	resubmitted bool
	// called is set once the executor was called (its result is then a
	// possible duplicate if it cannot be written).
	called bool
	// calling is set while the executor call is under way (duplicate
	// accounting at a shard move).
	calling atomic.Bool
	// rel is the release walk that dispatched this blocked task before its
	// time (release.go); nil for a due task.
	rel *release
	// dl is the task's destination's load in its shard's window, and
	// outAt the time it was dispatched, 0 while it is not (share.go; both
	// under sh.mu). callAt is when its call began, 0 if it was not made
	// (written by its worker before the call, read by the same worker).
	dl     *destLoad
	outAt  int64
	callAt int64
}

// newItem is a dispatch of t by sh; rel is the release walk that reads it
// before its time, or nil.
func newItem(t Task, sh *shard, rel *release) *item {
	it := &item{task: t, sh: sh, rel: rel}
	it.key = KeyOf(&it.task)
	return it
}

// scheduler is the host-wide group-by scheduler: one group per
// (TaskGroup, NamespaceID, Destination), shared by every shard.
type scheduler struct {
	q *Queue

	mu      sync.RWMutex // guards groups and closing; held (R) across submit so Close can fence wg.Add
	groups  map[breakerpool.Key]*group
	closing bool

	rmu   sync.Mutex               // guards ramps; taken after mu, never before
	ramps map[breakerpool.Key]ramp // key → its recovery ramp, armed or under way (ramp.go)

	// turns is, per destination, the turn given to the last task an open
	// breaker of it refused (blockedTurn, defer.go); tmu guards it and is
	// taken alone.
	tmu   sync.Mutex
	turns map[string]time.Time

	// budgeted are the groups whose key has a fleet rate budget (fleet.go):
	// with the ramps' groups, the only ones retune and FleetBacklogs visit.
	// Whether a key has a budget is config, so create, refresh and gc keep
	// the set and the 100 ms retune makes no limits lookup per group:
	// walking every group kept 6 % of a core busy on a node with 50,000
	// idle keys, each kept GroupIdleTTL (RECOVERY.md, "Staged recovery").
	// fmu guards it; taken after mu (R or W), never with rmu held.
	fmu      sync.Mutex
	budgeted map[breakerpool.Key]*group

	wg       sync.WaitGroup // workers
	buffered atomic.Int64
	active   atomic.Int64

	// wake tells rampLoop that a first budgeted group or a ramp may have
	// appeared: with neither it does not tick (ramp.go); fleetWake tells
	// the fleet report's sampler that a first budgeted group may have
	// appeared (FleetWake).
	wake, fleetWake chan struct{}
}

func newScheduler(q *Queue) *scheduler {
	return &scheduler{q: q, groups: make(map[breakerpool.Key]*group), ramps: make(map[breakerpool.Key]ramp),
		turns: make(map[string]time.Time), budgeted: make(map[breakerpool.Key]*group),
		wake: make(chan struct{}, 1), fleetWake: make(chan struct{}, 1)}
}

// kick wakes rampLoop and the fleet sampler; it never blocks.
func (s *scheduler) kick() {
	for _, ch := range []chan struct{}{s.wake, s.fleetWake} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// idle reports whether there is nothing to retune: no budgeted group and
// no ramp. Other groups' rates change only with the config (refresh).
func (s *scheduler) idle() bool {
	s.fmu.Lock()
	n := len(s.budgeted)
	s.fmu.Unlock()
	s.rmu.Lock()
	n += len(s.ramps)
	s.rmu.Unlock()
	return n == 0
}

// setBudgeted records whether g's key has a fleet budget (s.mu held, R or
// W; g in s.groups). A first budgeted group wakes rampLoop and the fleet
// sampler.
func (s *scheduler) setBudgeted(g *group, on bool) {
	s.fmu.Lock()
	_, was := s.budgeted[g.key]
	switch {
	case on && !was:
		s.budgeted[g.key] = g
	case !on && was:
		delete(s.budgeted, g.key)
	}
	first := on && !was && len(s.budgeted) == 1
	s.fmu.Unlock()
	if first {
		s.kick()
	}
}

// group is one key's buffer, concurrency limit and rate limiter. Workers are
// goroutines started on demand, at most conc of them, that exit when the
// buffer is empty: an idle group has none.
type group struct {
	key  breakerpool.Key
	s    *scheduler
	lim  *rate.Limiter
	gate chan struct{} // one slot: serializes token acquisition (see acquireToken)
	// callTime is the moving average of the group's call durations (ns,
	// float64 bits; 0 until the first call): with conc it bounds the
	// group's rate (pace, defer.go).
	callTime atomic.Uint64
	// inCall counts the group's calls under way and lastCall is when the
	// latest began (unix ns): with every slot busy, the calls take at least
	// its age, before any of them has ended (pace, defer.go).
	inCall   atomic.Int32
	lastCall atomic.Int64

	mu       sync.Mutex
	buf      []*item // FIFO; buf[head:] are queued
	head     int
	bufCap   int
	conc     int
	workers  int
	lastUsed time.Time
	changed  chan struct{} // closed when limits change, wakes token waiters
	// waiting are the shards holding a task this full buffer refused; they
	// are told once it has drained to half (or its limits change).
	waiting []*shard
	// dry are the shards that deferred tasks of this key, told one at a
	// time when it runs dry (recall.go).
	dry []*shard
}

// lookup returns k's group, or nil when it has none.
func (s *scheduler) lookup(k breakerpool.Key) *group {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.groups[k]
}

// limitsFor reads a key's limits, clamped to sane values.
func limitsFor(l Limits, k breakerpool.Key) (bufCap, conc int, rps rate.Limit, burst int) {
	bufCap = max(1, l.BufferSize(k.NamespaceID, k.Destination))
	conc = max(1, l.Concurrency(k.NamespaceID, k.Destination))
	r := l.MaxTaskRPS(k.NamespaceID, k.Destination)
	switch {
	case math.IsInf(r, 1):
		return bufCap, conc, rate.Inf, 1
	case !(r > 0): // zero, negative or NaN: nothing is admitted until it changes
		return bufCap, conc, 0, 1
	}
	return bufCap, conc, rate.Limit(r), int(min(math.Ceil(r), 1<<30))
}

// submit queues it on its group without blocking. It returns false when the
// group's buffer is full or the scheduler is closing. For a full buffer the
// group remembers it.sh and tells it when there is room again (roomFor).
func (s *scheduler) submit(it *item) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closing {
		return false
	}
	k := it.key
	g := s.groups[k]
	if g == nil {
		s.mu.RUnlock()
		g = s.create(k)
		s.mu.RLock()
		if s.closing {
			return false
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.buf)-g.head >= g.bufCap {
		if !slices.Contains(g.waiting, it.sh) {
			g.waiting = append(g.waiting, it.sh)
		}
		return false
	}
	g.buf = append(g.buf, it)
	g.lastUsed = time.Now()
	s.buffered.Add(1)
	if g.workers < g.conc {
		g.workers++
		s.wg.Add(1)
		go g.work()
	}
	return true
}

// create returns k's group, making it if needed. The GC only removes a
// group under s.mu with no queued items, and submit re-reads the map under
// s.mu.RLock, so a group found here is live while submit holds the lock.
func (s *scheduler) create(k breakerpool.Key) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[k]; g != nil {
		return g
	}
	l := s.q.limits.Current()
	bufCap, conc, _, _ := limitsFor(l, k)
	rps, burst, _ := s.rateFor(l, k, time.Now())
	g := &group{
		key: k, s: s, lim: rate.NewLimiter(rps, burst), gate: make(chan struct{}, 1),
		bufCap: bufCap, conc: conc, lastUsed: time.Now(), changed: make(chan struct{}),
	}
	s.groups[k] = g
	s.setBudgeted(g, s.q.fleetManaged(l, k))
	return g
}

// work is one worker: it runs queued items until the buffer is empty or the
// group has more workers than its concurrency limit allows.
func (g *group) work() {
	defer g.s.wg.Done()
	for {
		g.mu.Lock()
		if g.head == len(g.buf) || g.workers > g.conc {
			g.workers--
			g.lastUsed = time.Now()
			// Dry now, if no shard holds tasks for it: the last dequeue
			// found shards waiting and did not tell the shards waiting for
			// it to run dry (below), and a waiting shard told of room may
			// have nothing left to offer (its held tasks deferred, or held
			// for their destination's share), so no dequeue would follow
			// to tell them, and their deferred tasks waited for the
			// recall backstop, DeferAfter later (recall.go).
			dry := g.takeDryLocked()
			g.mu.Unlock()
			dryFor(dry)
			return
		}
		it := g.buf[g.head]
		g.buf[g.head] = nil
		g.head++
		if g.head == len(g.buf) {
			g.buf, g.head = g.buf[:0], 0
		} else if g.head > 64 && g.head*2 > len(g.buf) {
			n := copy(g.buf, g.buf[g.head:])
			clear(g.buf[n:])
			g.buf, g.head = g.buf[:n], 0
		}
		// dry before waiting: a group some shard holds tasks for is not
		// dry, even as this dequeue tells that shard there is room.
		dry := g.takeDryLocked()
		waiting := g.takeWaitingLocked()
		g.mu.Unlock()
		roomFor(waiting)
		dryFor(dry)
		g.s.buffered.Add(-1)
		g.s.active.Add(1)
		g.s.q.process(g, it)
		g.s.active.Add(-1)
	}
}

// takeWaitingLocked returns (and forgets) the shards waiting for room once
// the buffer has drained to half its capacity. g.mu must be held.
func (g *group) takeWaitingLocked() []*shard {
	if len(g.waiting) == 0 || (len(g.buf)-g.head)*2 > g.bufCap {
		return nil
	}
	w := g.waiting
	g.waiting = nil
	return w
}

// roomFor tells each shard that a buffer it waits for has room.
func roomFor(shards []*shard) {
	for _, sh := range shards {
		sh.room.Store(true)
		signal(sh.wake)
	}
}

// refresh applies the current limits to every group: buffer and
// concurrency resize at once (a smaller limit lets running calls finish),
// the rate limiter's limit and burst change in place (tune: a recovery ramp
// or a fleet share may lower them), and token waiters recompute their wait.
func (s *scheduler) refresh() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := s.q.limits.Current()
	for k, g := range s.groups {
		bufCap, conc, _, _ := limitsFor(l, k)
		s.setBudgeted(g, s.q.fleetManaged(l, k)) // before tune: retune takes it over from here
		s.tune(g, l, time.Now(), false)          // a ramp or fleet share lowers the configured rate
		g.mu.Lock()
		g.bufCap, g.conc = bufCap, conc
		close(g.changed)
		g.changed = make(chan struct{})
		for !s.closing && g.workers < g.conc && g.workers < len(g.buf)-g.head {
			g.workers++
			s.wg.Add(1)
			go g.work()
		}
		waiting := g.takeWaitingLocked() // a larger buffer may have room now
		g.mu.Unlock()
		roomFor(waiting)
	}
}

// gc removes groups that have been idle (no workers, nothing queued) for
// GroupIdleTTL. The rate limiter's state goes with them, which is harmless:
// a fresh limiter starts with a full burst, as an idle one would have.
func (s *scheduler) gc(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, g := range s.groups {
		g.mu.Lock()
		idle := g.workers == 0 && g.head == len(g.buf) && now.Sub(g.lastUsed) >= s.q.cfg.GroupIdleTTL
		g.mu.Unlock()
		if idle {
			s.setBudgeted(g, false)
			delete(s.groups, k)
			n++
		}
	}
	s.tmu.Lock()
	for d, at := range s.turns {
		if at.Before(now) { // a past turn counts as none (blockedTurn)
			delete(s.turns, d)
		}
	}
	s.tmu.Unlock()
	return n
}

func (s *scheduler) groupCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.groups)
}

// close stops new submissions; workers then drain the buffers, releasing
// what they have not started.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}
