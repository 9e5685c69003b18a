package pgstore

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// openWaker opens a store on url whose backstop poll never fires in a
// test, so only a notification (or, with NoListen, the newest-id read)
// can wake its subscribers.
func openWaker(t *testing.T, url string, noListen bool) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{URL: url, PollInterval: time.Hour, WakeInterval: 10 * time.Millisecond, NoListen: noListen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func wakeTask(id, shard int) state.NewTask {
	return state.NewTask{ID: fmt.Sprintf("%032x", id), Shard: shard, NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "callbacks.Invocation",
		Destination: "https://example.com/cb", Request: []byte(`{}`)}
}

// A submit through another store wakes this store's subscribers: by
// LISTEN/NOTIFY, and with it off (databases without it) by the newest-id
// read every WakeInterval.
func TestOtherNodesSubmitWakesSubscribers(t *testing.T) {
	for _, noListen := range []bool{false, true} {
		t.Run(fmt.Sprintf("noListen=%v", noListen), func(t *testing.T) {
			url := pgtest.NewDatabase(t)
			reader, writer := openWaker(t, url, noListen), openWaker(t, url, noListen)
			if !noListen {
				testwait.For(t, 20*time.Second, "the reader to listen", reader.listening.Load)
			} else if reader.listening.Load() || reader.sendNotify.Load() {
				t.Fatal("NoListen: the store listens or notifies")
			}
			ch, cancel := reader.Subscribe()
			defer cancel()
			deadline := time.After(10 * time.Second)
			for i := range 3 {
				drain(ch)
				if _, err := writer.Submit(t.Context(), []state.NewTask{wakeTask(500+i, 0)}, time.Now()); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ch:
				case <-deadline:
					t.Fatalf("submit %d through the other store woke no subscriber", i)
				}
			}
		})
	}
}

// A notification names the shards a submit added tasks to: only their
// readers (and all-shard subscribers) wake. A malformed notification is
// counted and wakes everyone.
func TestNotificationWakesOnlyItsShards(t *testing.T) {
	url := pgtest.NewDatabase(t)
	reader, writer := openWaker(t, url, false), openWaker(t, url, false)
	testwait.For(t, 20*time.Second, "the reader to listen", reader.listening.Load)
	one, cancel1 := reader.SubscribeShard(1)
	defer cancel1()
	two, cancel2 := reader.SubscribeShard(2)
	defer cancel2()
	all, cancelAll := reader.Subscribe()
	defer cancelAll()
	drain(one)
	drain(two)
	drain(all)
	if _, err := writer.Submit(t.Context(), []state.NewTask{wakeTask(700, 1)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-one:
	case <-time.After(10 * time.Second):
		t.Fatal("a submit to shard 1 did not wake shard 1's reader")
	}
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("a submit to shard 1 did not wake the all-shard subscriber")
	}
	select { // the same notification woke shard 1: it did not wake shard 2
	case <-two:
		t.Fatal("a submit to shard 1 woke shard 2's reader")
	default:
	}

	if _, err := writer.pool.Exec(t.Context(), `SELECT pg_notify($1, $2)`, notifyChannel, "1,x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-two:
	case <-time.After(10 * time.Second):
		t.Fatal("a malformed notification did not wake every reader")
	}
	if n := reader.badNotices.Load(); n != 1 {
		t.Fatalf("malformed notifications counted: %d, want 1", n)
	}
}

func TestNotifyPayload(t *testing.T) {
	at := time.UnixMilli(1733240000123).UTC()
	lows := map[int]time.Time{7: at, 0: {}, 12: at.Add(time.Millisecond + 999*time.Microsecond)}
	if p := notifyPayload(lows); p != "0,7@1733240000123,12@1733240000124" {
		t.Fatalf("payload %q (a time is sent in milliseconds, rounded down: never after the task's)", p)
	}
	got, err := parseNotifyPayload("0,7@1733240000123,12@1733240000124")
	if err != nil || len(got) != 3 || !got[0].IsZero() || !got[7].Equal(at) || !got[12].Equal(at.Add(time.Millisecond)) {
		t.Fatalf("parse: %v %v", got, err)
	}
	// What nodes built before the times were sent notify: shards, no times
	// (read whole).
	if got, err := parseNotifyPayload("0,7,12"); err != nil || len(got) != 3 || !got[7].IsZero() {
		t.Fatalf("parse of shard numbers alone: %v %v", got, err)
	}
	// A shard named twice keeps its earliest time; unknown is earliest.
	if got, err := parseNotifyPayload("3@2000,3@1000,4@1000,4"); err != nil || got[3].UnixMilli() != 1000 || !got[4].IsZero() {
		t.Fatalf("shards named twice: %v %v", got, err)
	}
	if set, err := parseNotifyPayload(""); err != nil || set != nil {
		t.Fatalf("empty payload: %v %v, want every shard (nil)", set, err)
	}
	big := make(map[int]time.Time)
	for i := range 2000 {
		big[i] = at
	}
	if p := notifyPayload(big); p != "" {
		t.Fatalf("a long shard list is sent as every shard, got %d bytes", len(p))
	}
	all := make(map[int]time.Time) // 256 shards, each with a time, fit in one notification
	for i := range 256 {
		all[i] = at
	}
	if p := notifyPayload(all); p == "" || len(p) > 8000-len(notifyChannel) {
		t.Fatalf("256 timed shards: %d bytes", len(p))
	}
	for _, bad := range []string{"x", "1,,2", "-1", "1,2,", "99999999999999999999", "1@", "1@x", "1@-5", "1@0",
		"1@99999999999999999", "@5", "1@2@3"} {
		if _, err := parseNotifyPayload(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// FuzzParseNotifyPayload: a notification's payload comes from anyone who
// can notify on the database: never a panic, and what is accepted is
// printed back the same (each shard at its earliest time).
func FuzzParseNotifyPayload(f *testing.F) {
	for _, s := range []string{"", "0", "1,2,3", "x", "1,,2", "-5", "4095,0", "3@1733240000123,4", "1@0", "2@5,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		lows, err := parseNotifyPayload(p)
		if err != nil || lows == nil {
			return
		}
		for sh, at := range lows {
			if sh < 0 || (!at.IsZero() && at.UnixMilli() <= 0) {
				t.Fatalf("%q: shard %d at %v", p, sh, at)
			}
		}
		back := notifyPayload(lows)
		if back == "" {
			return // too long to send: every shard
		}
		again, err := parseNotifyPayload(back)
		if err != nil || !maps.EqualFunc(again, lows, time.Time.Equal) {
			t.Fatalf("%q: round trip %v %v", p, again, err)
		}
	})
}

// A notification's transaction does not wait for its commit to be flushed
// (notifySQL), and that setting ends with it: the pool's connection (one
// here, so the same one) still commits synchronously afterwards, so no
// task write runs with synchronous_commit off.
func TestNotifyLeavesSynchronousCommitOn(t *testing.T) {
	url := pgtest.NewDatabase(t)
	reader := openWaker(t, url, false)
	writer, err := Open(t.Context(), Config{URL: url, PollInterval: time.Hour, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(writer.Close)
	testwait.For(t, 20*time.Second, "the reader to listen", reader.listening.Load)
	ch, cancel := reader.SubscribeShard(4)
	defer cancel()
	drain(ch)
	// The shared test server commits asynchronously: the session (the
	// pool's one connection) is set as a durable server's would be.
	if _, err := writer.pool.Exec(t.Context(), `SET synchronous_commit = on`); err != nil {
		t.Fatal(err)
	}
	writer.wakeOthers(map[int]time.Time{4: time.Now()})
	testwait.For(t, 10*time.Second, "the notification to wake shard 4's reader", func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})
	var set string
	if err := writer.pool.QueryRow(t.Context(), `SELECT current_setting('synchronous_commit')`).Scan(&set); err != nil {
		t.Fatal(err)
	}
	if set != "on" {
		t.Fatalf("synchronous_commit after a notification = %q, want on", set)
	}
}
