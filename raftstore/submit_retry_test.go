package raftstore

import (
	"strings"
	"testing"
	"time"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// A retry of a submit whose tasks a backlog limit refused decides those
// tasks afresh, down a chain of derived request ids: each retry refused
// again leaves one link, a retry once there is room follows the links it
// has applied without proposing them again and proposes the next, and the
// tasks it gets in are the answer of every later retry, through any node.
// Submits go through a follower (forwarded to the leader).
func TestRetryOfRefusedSubmitFollowsItsChain(t *testing.T) {
	c := threeVoters(t, nil)
	l := c.leader(10 * time.Second)
	f := c.follower()
	ctx := t.Context()
	if _, err := l.SetShardCount(ctx, state.SetShardCountCommand{Count: taskShards}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := shardmap.Rebalance(mustNewMap(t, taskShards), []string{"n1", "n2", "n3"}, nil)
	idx, err := l.CommitShardMap(ctx, state.CommitShardMapCommand{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(idx, 10*time.Second)
	submit := func(s *Store, limit int, rid string, wfs ...string) []state.SubmitOutcome {
		t.Helper()
		cmd := state.SubmitTasksCommand{CommandMeta: state.CommandMeta{RequestID: rid}}
		for _, wf := range wfs {
			nt := newTaskFor("", "ns", wf, "")
			nt.MaxDestinationBacklog = limit
			cmd.Tasks = append(cmd.Tasks, nt)
		}
		out, _, err := s.SubmitTasks(ctx, cmd)
		if err != nil || len(out) != len(wfs) {
			t.Fatalf("submit %s: %+v, %v", rid, out, err)
		}
		return out
	}
	outcomes := func(out []state.SubmitOutcome) string {
		var b []string
		for _, o := range out {
			b = append(b, o.Outcome)
		}
		return strings.Join(b, ",")
	}
	// entries runs fn and returns how many entries the leader appended.
	entries := func(fn func()) uint64 {
		before := l.Stats().LastIndex
		fn()
		return l.Stats().LastIndex - before
	}

	if out := submit(f, 1, "", "fill"); outcomes(out) != "accepted" {
		t.Fatalf("fill: %+v", out)
	}
	if n := entries(func() {
		if out := submit(f, 1, "r", "a", "b"); outcomes(out) != "overloaded,overloaded" {
			t.Fatalf("first attempt: %+v", out)
		}
	}); n != 1 {
		t.Fatalf("the first attempt appended %d entries, want 1", n)
	}
	// Retries while the destination is still full: each is the replay of
	// the request's entry, then one link, refused afresh (the API checks
	// a single submit's retry against the backlog first; a batch's goes on).
	for i := range 3 {
		if n := entries(func() {
			if out := submit(f, 1, "r", "a", "b"); outcomes(out) != "overloaded,overloaded" {
				t.Fatalf("retry %d while full: %+v", i, out)
			}
		}); n != 2 {
			t.Fatalf("retry %d while full appended %d entries, want 2 (the replay, one new link)", i, n)
		}
	}
	// Room for one more: the retry follows the three links it applied and
	// decides the two tasks in the fourth; one gets in.
	var first []state.SubmitOutcome
	if n := entries(func() { first = submit(f, 2, "r", "a", "b") }); n != 2 || outcomes(first) != "accepted,overloaded" {
		t.Fatalf("retry with room for one: %+v, %d entries; want accepted,overloaded in 2", first, n)
	}
	// Room for the other: only the refused task goes again; the accepted
	// one keeps its task.
	second := submit(f, 3, "r", "a", "b")
	if outcomes(second) != "accepted,accepted" || second[0] != first[0] {
		t.Fatalf("retry with room for both: %+v, want %+v kept and b accepted", second, first[0])
	}
	// Through every node, once it has applied the answers (a client's
	// retry comes a Retry-After later): a node still behind the refusal
	// would read its replay as its own answer.
	c.waitAllApplied(l.Stats().LastIndex, 10*time.Second)
	for id, s := range c.nodes {
		if again := submit(s, 3, "r", "a", "b"); again[0] != second[0] || again[1] != second[1] {
			t.Fatalf("a later retry through %s: %+v, want %+v", id, again, second)
		}
	}
	ts, _ := l.Reader().ListTasksPage(state.TaskQuery{Limit: 100})
	if len(ts) != 3 {
		t.Fatalf("%d tasks stored, want 3 (fill, a, b)", len(ts))
	}
}

// A derived id fits the log's bound, whatever the root; each index gives
// its own.
func TestRetryIDFitsTheBound(t *testing.T) {
	if got := retryID("rid2:abc", 42); got != "rid2:abc@42" {
		t.Fatalf("retryID = %q", got)
	}
	long := strings.Repeat("r", state.MaxRequestIDLen)
	a, b := retryID(long, 1), retryID(long, 2)
	if len(a) > state.MaxRequestIDLen || a == b || a != retryID(long, 1) {
		t.Fatalf("retryID of a long root: %q, %q", a, b)
	}
	if err := state.ValidateCommand([]byte{byte(state.MsgSubmitTasks)}, a); err != nil {
		t.Fatalf("derived id refused: %v", err)
	}
}
