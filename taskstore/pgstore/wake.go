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
	// limit is 8,000 bytes); a longer one is sent empty: every shard.
	maxNotifyPayload = 4000
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
func (s *Store) wakeShards(set map[int]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch, shard := range s.subs {
		if set != nil && shard != allShards && !set[shard] {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// notifyPayload is the notification of a write to shards: their numbers,
// sorted, comma-separated; empty (every shard) when that would be long.
func notifyPayload(set map[int]bool) string {
	shards := make([]int, 0, len(set))
	for sh := range set {
		shards = append(shards, sh)
	}
	slices.Sort(shards)
	var b strings.Builder
	for i, sh := range shards {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sh))
		if b.Len() > maxNotifyPayload {
			return ""
		}
	}
	return b.String()
}

// parseNotifyPayload reads a notification's payload: "" is every shard
// (nil), else shard numbers separated by commas. Any node (or anyone with
// access to the database) can notify, so a malformed payload is an error
// naming the bad part; the caller then wakes every shard.
func parseNotifyPayload(p string) (map[int]bool, error) {
	if p == "" {
		return nil, nil
	}
	if len(p) > maxNotifyPayload+16 {
		return nil, fmt.Errorf("payload: %d bytes, more than %d", len(p), maxNotifyPayload+16)
	}
	set := make(map[int]bool)
	for part := range strings.SplitSeq(p, ",") {
		sh, err := strconv.Atoi(part)
		if err != nil || sh < 0 || sh > 1<<20 {
			return nil, fmt.Errorf("payload: shard %.20q: not a shard number", part)
		}
		set[sh] = true
	}
	return set, nil
}

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
// that tasks were written there, after the write committed: it hands the
// shards to the notifier and returns, so a submit's answer does not wait
// for the notification, and the writes of one moment share one. Best
// effort: a lost notification costs latency (the backstop poll), not a
// task.
func (s *Store) wakeOthers(set map[int]bool) {
	if !s.sendNotify.Load() || (set != nil && len(set) == 0) {
		return
	}
	s.outMu.Lock()
	if set == nil {
		s.outAll = true
	} else {
		if s.outSet == nil {
			s.outSet = make(map[int]bool)
		}
		for sh := range set {
			s.outSet[sh] = true
		}
	}
	s.outMu.Unlock()
	select {
	case s.outKick <- struct{}{}:
	default:
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
		payload := ""
		if !all {
			payload = notifyPayload(set)
		}
		ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.QueryTimeout)
		if _, err := s.pool.Exec(ctx, notifySQL, notifyChannel, payload); err != nil && s.stopCtx.Err() == nil {
			s.wakeFailed("notify", err)
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
	s.notify() // what other nodes submitted while this store was not listening
	s.listening.Store(true)
	defer s.listening.Store(false)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		set, err := parseNotifyPayload(n.Payload)
		if err != nil {
			s.badNotices.Add(1)
			s.wakeFailed("notification dropped", err)
			set = nil
		}
		s.wakeShards(set)
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
