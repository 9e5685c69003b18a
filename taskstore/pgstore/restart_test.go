package pgstore

import (
	"context"
	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/raftstore/state"
)

// TestSurvivesImmediateRestart: PostgreSQL stopped with an immediate
// shutdown (a crash) and started again; the pool reconnects, committed
// tasks are there, and a submit succeeds again once the server is back.
func TestSurvivesImmediateRestart(t *testing.T) {
	if _, err := pgtest.BinDir(); err != nil {
		t.Skip(err)
	}
	ctx := t.Context()
	srv, err := pgtest.StartWith(ctx, pgtest.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	s, err := Open(ctx, Config{URL: srv.URL("postgres")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	task := func() state.NewTask {
		return state.NewTask{ID: state.NewTaskID(time.Now()), NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "g", Destination: "d", Request: []byte(`{}`)}
	}
	first := task()
	if _, err := s.Submit(ctx, []state.NewTask{first}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := srv.StopImmediate(ctx); err != nil {
		t.Fatal(err)
	}
	down, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := s.Submit(down, []state.NewTask{task()}, time.Now()); err == nil {
		t.Fatal("a submit succeeded while the database was down")
	}
	cancel()
	if err := srv.StartAgain(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.Submit(ctx, []state.NewTask{task()}, time.Now())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no submit succeeded after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, ok, err := s.Task(ctx, first.ID); !ok || err != nil {
		t.Fatalf("committed task lost across the restart: %v %v", ok, err)
	}
}
