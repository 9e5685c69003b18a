package state

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// woken reports whether ch holds a wake, and empties it.
func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// taskInShard returns a new task (id) whose workflow hashes to shard.
func taskInShard(t *testing.T, id string, shard int) NewTask {
	t.Helper()
	for i := range 1000 {
		nt := newTaskFor(id, "ns", fmt.Sprintf("wf-%s-%d", id, i), "")
		if nt.Shard == shard {
			return nt
		}
	}
	t.Fatalf("no workflow of 1000 hashes to shard %d", shard)
	return NewTask{}
}

// TestSubscribeShardWakesOnlyItsShard: a submit wakes the subscribers of
// the shards it put tasks into and no other; a retry (a new due time) wakes
// its shard; a final result, which only takes a task out of the due order,
// wakes no shard subscriber (TableTasks subscribers still see every change);
// a restore wakes them all.
func TestSubscribeShardWakesOnlyItsShard(t *testing.T) {
	x := newTaskFSM(t)
	subs := make([]<-chan struct{}, taskShards)
	for s := range taskShards {
		ch, cancel := x.st.SubscribeShard(s)
		defer cancel()
		subs[s] = ch
	}
	all, cancelAll := x.st.Subscribe(TableTasks)
	defer cancelAll()
	check := func(step string, want ...int) {
		t.Helper()
		for s := range taskShards {
			wantWoken := false
			for _, w := range want {
				wantWoken = wantWoken || w == s
			}
			if got := woken(subs[s]); got != wantWoken {
				t.Errorf("%s: shard %d woken = %v, want %v", step, s, got, wantWoken)
			}
		}
	}

	x.submit(t0, 0, taskInShard(t, "a", 1), taskInShard(t, "b", 3))
	check("submit to shards 1 and 3", 1, 3)
	if !woken(all) {
		t.Fatal("submit did not wake TableTasks subscribers")
	}

	owner, epoch := x.owner(1)
	x.complete(1, owner, epoch, TaskResult{TaskID: "a", Status: TaskPending, Attempts: 1, NextAttemptAt: t0.Add(time.Minute), Message: "503"})
	check("retry in shard 1", 1)

	owner, epoch = x.owner(3)
	x.complete(3, owner, epoch, TaskResult{TaskID: "b", Status: TaskSucceeded, Attempts: 1, HTTPStatus: 200})
	check("final result in shard 3")
	if !woken(all) {
		t.Fatal("a result did not wake TableTasks subscribers")
	}

	// A cancelled subscription is not woken, and its shard's map entry goes.
	ch, cancel := x.st.SubscribeShard(2)
	cancel()
	cancel() // twice is safe
	x.submit(t0, 0, taskInShard(t, "c", 2))
	check("submit to shard 2", 2)
	if woken(ch) {
		t.Fatal("a cancelled subscription was woken")
	}
	x.st.mu.Lock()
	left := len(x.st.shardSubs[2])
	x.st.mu.Unlock()
	if left != 1 {
		t.Fatalf("shard 2 has %d subscriptions after one of two was cancelled, want 1", left)
	}

	data := snapshotBytes(t, x.f)
	dst := newTestFSM(t, StateOptions{})
	restored := make([]<-chan struct{}, taskShards)
	for s := range taskShards {
		ch, cancel := dst.State().SubscribeShard(s)
		defer cancel()
		restored[s] = ch
	}
	if err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	for s, ch := range restored {
		if !woken(ch) {
			t.Errorf("restore did not wake shard %d's subscriber", s)
		}
	}
}
