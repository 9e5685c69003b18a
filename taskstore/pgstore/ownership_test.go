package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// TestPausedOwnerWritesDoNotLand: n1 takes shard 0 at epoch 1 through the
// fenced ownership; while it is paused (its map still says epoch 1) the
// shard is reassigned and n2 raises the epoch to 2. When n1 resumes, its
// ack, reschedule and DLQ writes are refused with the typed error (the
// queue then drops the shard) and none of them land.
func TestPausedOwnerWritesDoNotLand(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	n1 := NewFencedOwnership(queuetest.NewOwnership(map[int]uint64{0: 1}), s, "n1", nil)
	t.Cleanup(n1.Close)
	watchFor(t, n1, map[int]uint64{0: 1})
	ids := make([]string, 3)
	tasks := make([]state.NewTask, 3)
	for i := range tasks {
		ids[i] = state.NewTaskID(time.Now().Add(time.Duration(i)))
		tasks[i] = state.NewTask{ID: ids[i], Shard: 0, NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "callbacks.Invocation",
			Destination: "http://127.0.0.1:9/cb", Request: []byte(`{}`)}
	}
	if _, err := s.Submit(ctx, tasks, time.Now()); err != nil {
		t.Fatal(err)
	}

	// The pause: n2 is given the shard at epoch 2 and takes it.
	n2 := NewFencedOwnership(queuetest.NewOwnership(map[int]uint64{0: 2}), s, "n2", nil)
	t.Cleanup(n2.Close)
	watchFor(t, n2, map[int]uint64{0: 2})
	// n1 resumes with its old view and writes.
	if owned, _ := n1.Watch(); owned[0] != 1 {
		t.Fatalf("paused n1 still believes %v", owned)
	}
	for i, r := range []queue.Result{
		{TaskID: ids[0], Status: queue.StatusSucceeded, Attempts: 1},
		{TaskID: ids[1], Status: queue.StatusPending, Attempts: 1, NextAttemptAt: time.Now().Add(time.Hour)},
		{TaskID: ids[2], Status: queue.StatusDLQ, Message: "poison"},
	} {
		err := s.Complete(ctx, 0, 1, []queue.Result{r})
		var woe *shardmap.WrongOwnerError
		if !errors.As(err, &woe) || woe.Owner != "n2" || woe.Epoch != 2 {
			t.Fatalf("stale write %d = %v", i, err)
		}
	}
	for _, id := range ids {
		if tk, _, _ := s.Task(ctx, id); tk.Status != state.TaskPending || tk.Attempts != 0 {
			t.Fatalf("a stale write landed: %+v", tk)
		}
	}
	// A node whose map is behind the database is not handed the shard.
	// (TestFailedAcquireRetried: it is tried again after RetryAfter.)
	late := NewFencedOwnership(queuetest.NewOwnership(map[int]uint64{0: 1}), s, "n3", nil)
	t.Cleanup(late.Close)
	owned, woke := late.Watch() // the acquire starts
	if _, ok := owned[0]; ok {
		t.Fatalf("a stale map's shard was handed to the queue: %v", owned)
	}
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("the end of an acquire did not wake the queue")
	}
	if owned, _ := late.Watch(); len(owned) != 0 { // it was refused
		t.Fatalf("a stale map's shard was handed to the queue: %v", owned)
	}
}

func TestRedactURL(t *testing.T) {
	for _, raw := range []string{
		"postgres://fusebox:s3cret@db.example:5432/fusebox?sslmode=require",
		"postgres://db.example/fusebox?password=s3cret",
		"host=db.example user=fusebox password=s3cret dbname=fusebox",
		"host=db.example password='s3cret' dbname=fusebox",
		"postgres://fusebox:s3cret@db.example:notaport/fusebox",
		// The client key's passphrase, and parameters RedactURL does not
		// know, are hidden too; settings with no secret stay readable.
		"postgres://fusebox@db.example/fusebox?sslmode=verify-full&sslpassword=s3cret",
		"postgres://fusebox@db.example/fusebox?SSLPassword=s3cret&pool_max_conns=4",
		"postgres://fusebox@db.example/fusebox?options=-c%20secret%3Ds3cret",
		"postgres://fusebox@db.example:notaport/fusebox?sslpassword=s3cret",
		"host=db.example sslpassword=s3cret dbname=fusebox",
	} {
		if got := RedactURL(raw); strings.Contains(got, "s3cret") || !strings.Contains(got, "db.example") {
			t.Errorf("RedactURL(%q) = %q", raw, got)
		}
	}
	got := RedactURL("postgres://fusebox@db.example/fusebox?sslmode=verify-full&pool_max_conns=4&sslpassword=s3cret")
	if !strings.Contains(got, "sslmode=verify-full") || !strings.Contains(got, "pool_max_conns=4") {
		t.Errorf("RedactURL hid settings that hold no secret: %q", got)
	}
}

// PublicReason (what /readyz, which needs no token, says) names a class
// of failure, never the host, user or database of the driver's error.
func TestPublicReason(t *testing.T) {
	for _, c := range []struct {
		url, want string
	}{
		{"postgres://alice:s3cret@127.0.0.1:1/secretdb?connect_timeout=2", "connection refused"},
		{"postgres://alice:s3cret@no-such-host.invalid:5432/secretdb?connect_timeout=2", "did not resolve"},
	} {
		_, err := Open(t.Context(), Config{URL: c.url})
		if err == nil {
			t.Fatalf("%s: opened", c.url)
		}
		got := PublicReason(err)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: PublicReason = %q (err %v), want %q", c.url, got, err, c.want)
		}
		for _, leak := range []string{"alice", "s3cret", "secretdb", "127.0.0.1", "no-such-host"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: PublicReason = %q names %q", c.url, got, leak)
			}
		}
	}
	if got := PublicReason(&pgconn.PgError{Code: "28P01", Message: `password authentication failed for user "alice"`}); !strings.Contains(got, "28P01") || strings.Contains(got, "alice") {
		t.Errorf("PublicReason(28P01) = %q", got)
	}
	if got := PublicReason(fmt.Errorf("ping: %w", context.DeadlineExceeded)); !strings.Contains(got, "in time") {
		t.Errorf("PublicReason(deadline) = %q", got)
	}
}

// TestOpenUnreachableSaysWhyWithoutPassword: no server on the port; the
// error names the redacted URL.
func TestOpenUnreachableSaysWhyWithoutPassword(t *testing.T) {
	_, err := Open(t.Context(), Config{URL: "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("open = %v", err)
	}
}

// TestReopenKeepsSchemaAndTasks: a second Open finds the schema at its
// version (golang-migrate: no change) and the tasks still there.
func TestReopenKeepsSchemaAndTasks(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	id := state.NewTaskID(time.Now())
	if _, err := s.Submit(ctx, []state.NewTask{{ID: id, NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "g", Destination: "d", Request: []byte(`{}`)}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, Config{URL: s.cfg.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, ok, err := s2.Task(ctx, id); !ok || err != nil {
		t.Fatalf("task after reopen: %v %v", ok, err)
	}
}

// freshOwnership is an inner ownership that is fresh or not as told.
type freshOwnership struct{ fresh bool }

func (o freshOwnership) Watch() (map[int]uint64, <-chan struct{}) { return nil, nil }
func (o freshOwnership) Fresh() bool                              { return o.fresh }

// Fresh is false while Reachable says the database is not, whatever the
// shard map says: a call whose result cannot be written is not started.
func TestFencedOwnershipNotFreshWhileUnreachable(t *testing.T) {
	reachable := true
	f := NewFencedOwnership(freshOwnership{fresh: true}, nil, "n1", nil)
	if !f.Fresh() {
		t.Fatal("not fresh with no Reachable set")
	}
	f.Reachable = func() bool { return reachable }
	if !f.Fresh() {
		t.Fatal("not fresh while reachable")
	}
	reachable = false
	if f.Fresh() {
		t.Fatal("fresh while the database is unreachable")
	}
	if g := NewFencedOwnership(freshOwnership{fresh: false}, nil, "n1", nil); g.Fresh() {
		t.Fatal("fresh though the shard map is not")
	}
}
