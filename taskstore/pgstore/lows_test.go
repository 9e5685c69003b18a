package pgstore

import (
	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// takeWhole takes shard's low and reports whether it asks for a full read.
func takeWhole(s *Store, shard int) bool {
	at, ok := s.TakeDueLow(shard)
	return ok && at.IsZero()
}

// The lows a reader takes: a full read first (and again after a listen
// starts: what was committed before it was not heard), then its own
// submits' and other nodes' (from their notifications), each the earliest
// due time written to the shard as stored, and a redrive reads every
// shard whole. Lows are tracked only while listening.
func TestLowsOfOwnAndOtherNodesSubmits(t *testing.T) {
	url := pgtest.NewDatabase(t)
	reader, writer := openWaker(t, url, false), openWaker(t, url, false)
	// Both listen before any low is taken: a store that starts listening
	// makes every shard's next low a full read (lows.go), which would
	// undo the writer's take of shard 5 below.
	testwait.For(t, 20*time.Second, "the reader and the writer to listen", func() bool {
		return reader.listening.Load() && writer.listening.Load()
	})
	if !reader.DueLowsTracked() {
		t.Fatal("a listening store does not track lows")
	}
	if !takeWhole(reader, 3) {
		t.Fatal("the first low of a shard since the store listens is not a full read")
	}
	if _, ok := reader.TakeDueLow(3); ok {
		t.Fatal("a low without a write")
	}

	ch, cancel := reader.SubscribeShard(3)
	defer cancel()
	drain(ch)
	early := time.Now().Add(-time.Minute).Add(123456 * time.Nanosecond)
	tasks := []state.NewTask{wakeTask(900, 3), wakeTask(901, 3), wakeTask(902, 4)}
	if _, err := writer.submitNow(t.Context(), tasks, []time.Time{time.Now(), early, early.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the other node's submit woke no reader")
	}
	// The low is recorded before the wake.
	at, ok := reader.TakeDueLow(3)
	if !ok || at.After(micro(early)) || micro(early).Sub(at) >= time.Millisecond {
		t.Fatalf("low of shard 3 from a notification: %v %v, want %v rounded down to the millisecond", at, ok, micro(early))
	}
	if _, ok := reader.TakeDueLow(3); ok {
		t.Fatal("a low taken twice")
	}

	// The writer's own submit: the low as stored, at once.
	takeWhole(writer, 5)
	if _, err := writer.submitNow(t.Context(), []state.NewTask{wakeTask(903, 5)}, []time.Time{early}); err != nil {
		t.Fatal(err)
	}
	if at, ok := writer.TakeDueLow(5); !ok || !at.Equal(micro(early)) {
		t.Fatalf("own low of shard 5: %v %v, want %v", at, ok, micro(early))
	}

	// A redrive (rare): every shard is read whole, here and at the others.
	reader.TakeDueLow(4)
	if _, err := writer.pool.Exec(t.Context(), `UPDATE fusebox_tasks SET status = 'dlq' WHERE id = $1`, wakeTask(903, 5).ID); err != nil {
		t.Fatal(err)
	}
	drain(ch)
	if out, err := writer.Redrive(t.Context(), []string{wakeTask(903, 5).ID}, false, time.Now()); err != nil || len(out.Redriven) != 1 {
		t.Fatalf("redrive: %+v %v", out, err)
	}
	if !takeWhole(writer, 9) {
		t.Fatal("after its redrive, the writer does not read shard 9 whole")
	}
	testwait.For(t, 10*time.Second, "the redrive's notification", func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})
	if !takeWhole(reader, 4) {
		t.Fatal("after another node's redrive, the reader does not read shard 4 whole")
	}
}

// A store hears its own notifications (it listens on the channel it
// notifies) and drops them: its writes' lows were recorded exactly at the
// write, and heard back, rounded down to the millisecond, they woke its
// readers a second time to read rows they already held.
func TestOwnNotificationsDropped(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s := openWaker(t, url, false)
	testwait.For(t, 20*time.Second, "the store to listen", s.listening.Load)
	takeWhole(s, 5)
	early := time.Now().Add(-time.Minute).Add(123456 * time.Nanosecond)
	if _, err := s.submitNow(t.Context(), []state.NewTask{wakeTask(950, 5)}, []time.Time{early}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the store's own notification heard and dropped", func() bool { return s.ownNotices.Load() >= 1 })
	if at, ok := s.TakeDueLow(5); !ok || !at.Equal(micro(early)) {
		t.Fatalf("own low of shard 5 after its notification came back: %v %v, want %v exactly", at, ok, micro(early))
	}
	if _, ok := s.TakeDueLow(5); ok {
		t.Fatal("a low taken twice")
	}
}

// A store that does not listen does not track lows: its readers read from
// a lag window before their cursor, and the whole shard often.
func TestLowsUntrackedWithoutListening(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s := openWaker(t, url, true)
	if s.DueLowsTracked() {
		t.Fatal("a store that does not listen tracks lows")
	}
}

// dueLows alone: the earliest low wins, unknown (zero) is earliest, a
// lowerAll makes each shard's next take full once.
func TestDueLows(t *testing.T) {
	d := newDueLows()
	if at, ok := d.take(1); !ok || !at.IsZero() {
		t.Fatalf("first take %v %v, want a full read", at, ok)
	}
	t0 := time.Unix(1000, 0)
	d.lower(1, t0.Add(time.Second))
	d.lower(1, t0)
	d.lower(1, t0.Add(2*time.Second))
	if at, ok := d.take(1); !ok || !at.Equal(t0) {
		t.Fatalf("take %v %v, want %v", at, ok, t0)
	}
	d.lower(1, t0)
	d.lower(1, time.Time{})
	if at, ok := d.take(1); !ok || !at.IsZero() {
		t.Fatalf("take after an unknown low %v %v, want a full read", at, ok)
	}
	d.take(2)
	d.lower(1, t0)
	d.lowerAll()
	for _, sh := range []int{1, 2} {
		if at, ok := d.take(sh); !ok || !at.IsZero() {
			t.Fatalf("shard %d after lowerAll: %v %v, want a full read", sh, at, ok)
		}
		if _, ok := d.take(sh); ok {
			t.Fatalf("shard %d: a second full read", sh)
		}
	}
}
