package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDestinationCounts counts pending, blocked and dead-lettered tasks per
// (namespace, breaker destination), busiest first, and flags a walk cut
// short.
func TestDestinationCounts(t *testing.T) {
	x := newTaskFSM(t)
	sub := func(id, ns, wf, dest string) NewTask {
		nt := newTaskFor(id, ns, wf, "")
		nt.Destination, nt.DestinationKey = dest+"/cb?token=secret", dest
		x.submit(t0, 0, nt)
		return nt
	}
	// a: three pending, one of them blocked, one dead-lettered.
	for i := range 3 {
		sub(fmt.Sprintf("a%d", i), "ns", fmt.Sprintf("wa%d", i), "http://a.example")
	}
	blocked := sub("a3", "ns", "wa3", "http://a.example")
	dead := sub("a4", "ns", "wa4", "http://a.example")
	// b: one pending in another namespace.
	sub("b0", "ns2", "wb0", "http://b.example")

	owner, epoch := x.owner(blocked.Shard)
	x.complete(blocked.Shard, owner, epoch, TaskResult{TaskID: "a3", Status: TaskPending, Attempts: 1, Blocked: 1, NextAttemptAt: t0.Add(time.Minute)})
	owner, epoch = x.owner(dead.Shard)
	x.complete(dead.Shard, owner, epoch, TaskResult{TaskID: "a4", Status: TaskDLQ, Attempts: 3, Message: "poison"})

	got, partial := x.st.DestinationCounts(1000)
	want := []DestinationCount{
		{Namespace: "ns", Destination: "http://a.example", Pending: 4, Blocked: 1, DLQ: 1},
		{Namespace: "ns2", Destination: "http://b.example", Pending: 1},
	}
	if partial || !cmp.Equal(got, want) {
		t.Fatalf("DestinationCounts = %+v (partial %v), want %+v", got, partial, want)
	}
	// A bounded walk says so; the pending counts stay exact.
	got, partial = x.st.DestinationCounts(2)
	if !partial || len(got) != 2 || got[0].Pending != 4 || got[1].Pending != 1 {
		t.Fatalf("DestinationCounts(2) = %+v (partial %v), want exact pending counts and partial", got, partial)
	}
}
