package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"fusebox/queue"
)

// Wake-ups. A shard's reader sleeps until its next due task, a local
// write, or a wake-up from here. Where the database has LISTEN/NOTIFY
// (PostgreSQL), a submit through any node sends a notification naming the
// shards it added tasks to, every node listens on one connection of its
// own, and only the readers of those shards wake: a task submitted
// elsewhere is seen in about a round trip, and an idle node makes no query
// but the backstop. Where it has not (CockroachDB, YugabyteDB), the store
// reads the newest task id every WakeInterval and wakes every reader when
// it changed. Either way every reader is woken every PollInterval (5×
// that while listening) as a backstop: correctness never depends on a
// notification.

const (
	// notifyChannel is the LISTEN/NOTIFY channel (a raw string, so that
	// deploy's metric-name scan does not take it for a metric).
	notifyChannel = `fusebox_tasks`
	// allShards is the shard of a subscription woken for every shard.
	allShards = -1
	// maxNotifyPayload bounds a notification's shard list (PostgreSQL's
	// limit is 8,000 bytes, channel name included); a longer one is sent
	// empty: every shard. 256 shards with their times take about 4,800.
	maxNotifyPayload = 7000
	// listenPollEvery: while listening, the backstop wake is every
	// listenPollEvery PollIntervals.
	listenPollEvery = 5
)

var _ queue.ShardSubscriber = (*Store)(nil)

// Subscribe implements queue.Store: a channel woken for a change in any
// shard, and a cancel func.
func (s *Store) Subscribe() (<-chan struct{}, func()) { return s.subscribe(allShards) }

// SubscribeShard implements queue.ShardSubscriber: a channel woken for
// changes to shard (and for changes the store cannot place), and a cancel
// func.
func (s *Store) SubscribeShard(shard int) (<-chan struct{}, func()) { return s.subscribe(shard) }

func (s *Store) subscribe(shard int) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[ch] = shard
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, ch)
			s.mu.Unlock()
		})
	}
}

// notify wakes every subscriber.
func (s *Store) notify() { s.wakeShards(nil) }

// wakeShards wakes the subscribers of the shards in set and every
// all-shard subscriber; a nil set wakes every subscriber.
func (s *Store) wakeShards(set map[int]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch, shard := range s.subs {
		if _, in := set[shard]; set != nil && shard != allShards && !in {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// notifyPayload is the notification of a write to shards: for each, its
// number and the earliest due time written there in Unix milliseconds,
// rounded down ("3@1733240000123"; a zero time is sent as the number
// alone: unknown), sorted by shard and comma-separated; empty (every
// shard, times unknown) when that would be long. Nodes built before the
// times were sent read only numbers: they take such a payload as
// malformed and wake every reader, as for an empty one (DESIGN.md,
// "Reported lows").
func notifyPayload(lows map[int]time.Time) string {
	shards := make([]int, 0, len(lows))
	for sh := range lows {
		shards = append(shards, sh)
	}
	slices.Sort(shards)
	var b strings.Builder
	for i, sh := range shards {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sh))
		if at := lows[sh]; !at.IsZero() {
			b.WriteByte('@')
			b.WriteString(strconv.FormatInt(at.UnixMilli(), 10))
		}
		if b.Len() > maxNotifyPayload {
			return ""
		}
	}
	return b.String()
}

// parseNotifyPayload reads a notification's payload: "" is every shard
// (nil), else shard numbers, each with an optional "@" and a due time in
// Unix milliseconds, separated by commas (a shard without a time has the
// zero time: read it whole). Any node (or anyone with access to the
// database) can notify, so a malformed payload is an error naming the bad
// part; the caller then wakes every shard and reads each whole.
func parseNotifyPayload(p string) (map[int]time.Time, error) {
	if p == "" {
		return nil, nil
	}
	if len(p) > maxNotifyPayload+32 {
		return nil, fmt.Errorf("payload: %d bytes, more than %d", len(p), maxNotifyPayload+32)
	}
	lows := make(map[int]time.Time)
	for part := range strings.SplitSeq(p, ",") {
		num, ms, timed := strings.Cut(part, "@")
		sh, err := strconv.Atoi(num)
		if err != nil || sh < 0 || sh > 1<<20 {
			return nil, fmt.Errorf("payload: shard %.20q: not a shard number", part)
		}
		var at time.Time
		if timed {
			v, err := strconv.ParseInt(ms, 10, 64)
			if err != nil || v <= 0 || v > maxNotifyMillis {
				return nil, fmt.Errorf("payload: shard %d: due time %.20q: not Unix milliseconds", sh, ms)
			}
			at = time.UnixMilli(v).UTC()
		}
		if cur, seen := lows[sh]; seen && (cur.IsZero() || (!at.IsZero() && cur.Before(at))) {
			continue // the earliest of a shard named twice; unknown is earliest
		}
		lows[sh] = at
	}
	return lows, nil
}

// maxNotifyMillis bounds a payload's due time: the year 9999.
const maxNotifyMillis = 253402300799999

// probeNotify finds whether the database has pg_notify (Init): only then
// do writers send notifications.
func (s *Store) probeNotify(ctx context.Context) {
	if s.cfg.NoListen {
		return
	}
	// On a channel of its own: no reader wakes for the probe.
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, notifyChannel+"_probe"); err != nil {
		s.log.Info("the database has no NOTIFY: readers poll for other nodes' submits", "err", err)
		return
	}
	s.sendNotify.Store(true)
}

// wakeOthers tells the other nodes' readers of shards (nil: every shard)
// that tasks were written there, due from the shard's time on, after the
// write committed: it hands the shards to the notifier and returns, so a
// submit's answer does not wait for the notification, and the writes of
// one moment share one. Best effort: a lost notification costs latency
// (the backstop poll, the backstop full read), not a task.
func (s *Store) wakeOthers(lows map[int]time.Time) {
	if !s.sendNotify.Load() || (lows != nil && len(lows) == 0) {
		return
	}
	s.outMu.Lock()
	s.addOutLocked(lows)
	s.outMu.Unlock()
	select {
	case s.outKick <- struct{}{}:
	default:
	}
}

// addOutLocked merges lows into the next notification (s.outMu held).
func (s *Store) addOutLocked(lows map[int]time.Time) {
	if lows == nil {
		s.outAll = true
		return
	}
	if s.outSet == nil {
		s.outSet = make(map[int]time.Time)
	}
	for sh, at := range lows {
		if cur, ok := s.outSet[sh]; !ok || at.Before(cur) {
			s.outSet[sh] = at
		}
	}
}

// notifySQL sends a notification in a transaction that does not wait for
// its commit record to be flushed: a transaction that notifies is given a
// transaction id, so with synchronous_commit on its commit waited for a WAL
// flush (an fsync) while holding PostgreSQL's database-wide notify lock,
// and the listeners heard nothing until that flush. It writes no data:
// the tasks it announces were committed (and flushed) by the submit
// before, and a notification lost in a crash costs a backstop read, not a
// task. set_config(…, true) lasts until this statement's implicit
// transaction ends, after its commit: nothing else runs with it.
const notifySQL = `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`

// notifier sends the notifications wakeOthers gathered, one statement for
// all the shards gathered since the last, until Close.
func (s *Store) notifier() {
	defer close(s.notifierDone)
	for {
		select {
		case <-s.stop:
			return
		case <-s.outKick:
		}
		s.outMu.Lock()
		set, all := s.outSet, s.outAll
		s.outSet, s.outAll = nil, false
		s.outMu.Unlock()
		if len(set) == 0 && !all {
			// A kick whose shards the previous notification took (a
			// writer's kick lands after the notifier took its shards):
			// an empty payload would mean every shard, each read whole.
			continue
		}
		payload := ""
		if !all {
			payload = notifyPayload(set)
		}
		ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.QueryTimeout)
		if _, err := s.pool.Exec(ctx, notifySQL, notifyChannel, payload); err != nil && s.stopCtx.Err() == nil {
			s.wakeFailed("notify", err)
			// Sent with the next notification, if there is one soon;
			// the others' backstop reads find the tasks otherwise.
			s.outMu.Lock()
			if all {
				set = nil
			}
			s.addOutLocked(set)
			s.outMu.Unlock()
		}
		cancel()
	}
}

// listen holds a connection of its own (not the pool's) listening on
// notifyChannel while the store is open, reconnecting with backoff. It
// returns for good when the database has no LISTEN.
func (s *Store) listen() {
	defer close(s.listenDone)
	if s.cfg.NoListen {
		return
	}
	const first = 100 * time.Millisecond
	wait := first
	for {
		pause := first // not open yet: look again soon
		if s.ready.Load() && !s.sendNotify.Load() {
			return // no NOTIFY here (probed by Init, before ready): nothing to hear
		}
		if s.ready.Load() {
			listened, err := s.listenOnce()
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "0A000" || pe.Code == "42601") {
				s.log.Info("the database has no LISTEN: readers poll for other nodes' submits", "err", err)
				s.sendNotify.Store(false) // every node shares the database: nobody listens
				return
			}
			if listened {
				wait = first
			}
			if s.stopCtx.Err() == nil {
				s.wakeFailed("listen", err)
			}
			pause, wait = wait, min(wait*2, 5*time.Second)
		}
		select {
		case <-s.stop:
			return
		case <-time.After(pause):
		}
	}
}

// listenOnce connects, listens and wakes readers per notification until
// the connection fails or the store closes. listened: LISTEN succeeded.
func (s *Store) listenOnce() (listened bool, err error) {
	ctx := s.stopCtx
	cctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	conn, err := pgx.ConnectConfig(cctx, s.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return false, err
	}
	// What other nodes submitted while this store was not listening: read
	// every shard whole (the lows were not heard), then track.
	s.lows.lowerAll()
	s.listening.Store(true)
	s.notify()
	defer s.listening.Store(false)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if s.ownNotice(n.PID) {
			s.ownNotices.Add(1)
			continue
		}
		lows, err := parseNotifyPayload(n.Payload)
		if err != nil {
			s.badNotices.Add(1)
			s.wakeFailed("notification dropped", err)
			lows = nil
		}
		s.recordLows(lows)
	}
}

// poll wakes the subscribers every PollInterval (every listenPollEvery
// while listening), and, while not listening, every WakeInterval when the
// newest task id changed (a submit through any node). Task ids begin with
// their creation time, so the newest id moves with every submit; an import
// (old ids) or a redrive is seen at the next full wake.
func (s *Store) poll() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	var q *time.Ticker
	if s.cfg.WakeInterval > 0 {
		q = time.NewTicker(s.cfg.WakeInterval)
		defer q.Stop()
	}
	last := ""
	ticks := 0
	for {
		// The newest-id read is waited for only while not listening: a
		// ticker's channel that nobody waits on does not wake the runtime,
		// and a listening node's 50 idle wake-ups a second were a part of
		// what five idle nodes cost. A store that stops listening resumes
		// the reads after the next PollInterval tick, which wakes the
		// readers itself.
		var quick <-chan time.Time
		if q != nil && !s.listening.Load() {
			quick = q.C
		}
		select {
		case <-t.C:
			ticks++
			if !s.listening.Load() || ticks%listenPollEvery == 0 {
				s.notify()
			}
		case <-quick:
			if !s.ready.Load() || s.listening.Load() {
				continue
			}
			ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.QueryTimeout)
			var id string
			err := s.pool.QueryRow(ctx, `SELECT id FROM fusebox_tasks ORDER BY id DESC LIMIT 1`).Scan(&id)
			cancel()
			if err == nil && id != last {
				last = id
				s.notify()
			}
		case <-s.stop:
			return
		}
	}
}

// wakeFailed logs a failed notification, listen or malformed notification
// at most once every 5 s; the backstop poll covers what it lost.
func (s *Store) wakeFailed(what string, err error) {
	s.wakeWarn.Do(func() {
		s.log.Warn(what+" failed; readers wake by polling meanwhile", "err", err, "malformed_notifications", s.badNotices.Load())
	})
}

// ownNotice reports whether a notification came from one of this store's
// own connections. Its lows were recorded, exactly, when the write
// committed (wroteLows); heard back, rounded down to the millisecond, they
// only woke the same readers again to read rows they already held. A
// process id recycled by another node's backend before this pool's
// BeforeClose ran would drop that node's notification: its tasks are
// found by the backstop read, as for a lost notification.
func (s *Store) ownNotice(pid uint32) bool {
	_, ok := s.ownPIDs.Load(pid)
	return ok
}
